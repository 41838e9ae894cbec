// Prints the wire layout of every API version a kafka-clients jar knows, as one JSON document.
//
// kwire's own tool (compiled and run by scripts/schemas/jar_facts.py). It reads the jar's
// protocol types (ApiMessageType, Schema, Field, TaggedFields) and writes
// {"apis": {"<apiKey>": {"name", "lowest", "highest", "unstable",
//                        "request": {"<v>": layout}, "response": {...},
//                        "requestClass": ..., "responseClass": ...}},
//  "classes": {"<class>": [[javaField, element, isList, default], ...]}}
// A layout is a list of [snake_name, type] pairs; a type is a primitive name (INT32,
// COMPACT_NULLABLE_STRING, ...), {"array": type, "compact": bool, "nullable": bool},
// {"struct": layout, "nullable": bool} or {"tagged": {"<tag>": [snake_name, type]}}.
// "classes" describes the generated *Data classes (and their nested struct classes) by
// reflection: the Java field names (camelCase of the schema names), the struct class of each
// struct field (the element class for lists), and the value a new instance holds (the default).
// "refused" lists, per class and Java field, the versions at which the jar refuses to write a
// message holding a non-default value there (UnsupportedVersionException "non-default <field>"):
// for a field absent from such a version that is what makes it not ignorable. A field without
// an entry could not be given a non-default value (a struct that is never null).
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.types.ArrayOf;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.CompactArrayOf;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.TaggedFields;

public final class KafkaWireLayouts {
    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static String field(Field f) {
        return "[" + quote(f.name) + ", " + type(f.type) + "]";
    }

    private static String layout(Schema schema) {
        StringBuilder out = new StringBuilder("[");
        BoundField[] fields = schema.fields();
        for (int i = 0; i < fields.length; i++) {
            if (i > 0) out.append(", ");
            out.append(field(fields[i].def));
        }
        return out.append("]").toString();
    }

    private static String type(org.apache.kafka.common.protocol.types.Type t) {
        if (t instanceof TaggedFields) {
            StringBuilder out = new StringBuilder("{\"tagged\": {");
            boolean first = true;
            for (Map.Entry<Integer, Field> e : ((TaggedFields) t).fields().entrySet()) {
                if (!first) out.append(", ");
                first = false;
                out.append(quote(String.valueOf(e.getKey()))).append(": ").append(field(e.getValue()));
            }
            return out.append("}}").toString();
        }
        if (t instanceof ArrayOf || t instanceof CompactArrayOf) {
            return "{\"array\": " + type(t.arrayElementType().get())
                + ", \"compact\": " + (t instanceof CompactArrayOf)
                + ", \"nullable\": " + t.isNullable() + "}";
        }
        if (t instanceof Schema) {
            return "{\"struct\": " + layout((Schema) t) + ", \"nullable\": " + t.isNullable() + "}";
        }
        return quote(t.toString());
    }

    private static String versions(Schema[] schemas, int lowest, int highest) {
        StringBuilder out = new StringBuilder("{");
        for (int v = lowest; v <= highest && v < schemas.length; v++) {
            if (schemas[v] == null) continue;
            if (out.length() > 1) out.append(", ");
            out.append(quote(String.valueOf(v))).append(": ").append(layout(schemas[v]));
        }
        return out.append("}").toString();
    }

    private static final Map<String, String> CLASSES = new LinkedHashMap<>();
    // class -> [parent class, field in the parent] (the first path found from the message root)
    private static final Map<String, String[]> PARENTS = new LinkedHashMap<>();
    private static final StringBuilder REFUSED = new StringBuilder();

    private static Class<?> element(Type generic, Class<?> raw) {
        if (generic instanceof ParameterizedType && List.class.isAssignableFrom(raw)) {
            Type arg = ((ParameterizedType) generic).getActualTypeArguments()[0];
            return arg instanceof Class ? (Class<?>) arg : null;
        }
        // XxxCollection extends ImplicitLinkedHashMultiCollection<Xxx>
        Type sup = raw.getGenericSuperclass();
        while (sup != null) {
            if (sup instanceof ParameterizedType) {
                Type arg = ((ParameterizedType) sup).getActualTypeArguments()[0];
                return arg instanceof Class ? (Class<?>) arg : null;
            }
            sup = ((Class<?>) sup).getGenericSuperclass();
        }
        return null;
    }

    private static void describe(Class<?> root) throws Exception {
        Deque<Class<?>> todo = new ArrayDeque<>();
        todo.add(root);
        while (!todo.isEmpty()) {
            Class<?> c = todo.poll();
            String key = c.getName();
            if (CLASSES.containsKey(key)) continue;
            CLASSES.put(key, "");
            Object instance = c.getConstructor().newInstance();
            StringBuilder out = new StringBuilder("[");
            for (java.lang.reflect.Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) || f.isSynthetic()) continue;
                if (f.getName().startsWith("_")) continue;
                f.setAccessible(true);
                Class<?> raw = f.getType();
                boolean isList = List.class.isAssignableFrom(raw)
                    || java.util.Collection.class.isAssignableFrom(raw);
                Class<?> elem = isList ? element(f.getGenericType(), raw) : raw;
                String elemName = elem == null ? "?" : elem.getName();
                if (elem != null && org.apache.kafka.common.protocol.Message.class.isAssignableFrom(elem)) {
                    todo.add(elem);
                    PARENTS.putIfAbsent(elem.getName(), new String[] {key, f.getName()});
                }
                Object value = f.get(instance);
                String shown;
                if (value == null) shown = "null";
                else if (value instanceof java.util.Collection) shown = "[]";
                else if (value instanceof byte[]) shown = "bytes[" + ((byte[]) value).length + "]";
                else if (value instanceof org.apache.kafka.common.protocol.Message) shown = "{}";
                else shown = String.valueOf(value);
                if (out.length() > 1) out.append(", ");
                out.append("[").append(quote(f.getName())).append(", ").append(quote(elemName))
                    .append(", ").append(isList).append(", ").append(quote(shown)).append("]");
            }
            CLASSES.put(key, out.append("]").toString());
        }
    }

    // The message class of an API (described into CLASSES), or "" for the removed APIs the jar
    // keeps as ids only (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown).
    private static String className(ApiMessageType api, boolean request) throws Exception {
        if (api.requestSchemas().length == 0) return "";
        Class<?> c = (request ? api.newRequest() : api.newResponse()).getClass();
        describe(c);
        probe(api, request, c.getName());
        return c.getName();
    }

    // A new instance of c, or of its list's element when the field is a list.
    private static Object fresh(Class<?> c) throws Exception {
        return c.getConstructor().newInstance();
    }

    @SuppressWarnings("unchecked")
    private static Object reach(Object root, String cls) throws Exception {
        if (root.getClass().getName().equals(cls)) return root;
        String[] up = PARENTS.get(cls);
        if (up == null) return null;
        Object parent = reach(root, up[0]);
        if (parent == null) return null;
        java.lang.reflect.Field f = parent.getClass().getDeclaredField(up[1]);
        f.setAccessible(true);
        Class<?> child = Class.forName(cls);
        if (java.util.Collection.class.isAssignableFrom(f.getType())) {
            java.util.Collection<Object> list = (java.util.Collection<Object>) f.get(parent);
            if (list == null) {
                list = f.getType().isInterface() ? new java.util.ArrayList<>()
                    : (java.util.Collection<Object>) f.getType().getConstructor().newInstance();
                f.set(parent, list);
            }
            Object item = fresh(child);
            list.add(item);
            return item;
        }
        Object item = f.get(parent);
        if (item == null) {
            item = fresh(child);
            f.set(parent, item);
        }
        return item;
    }

    // A value unlike the one a new instance holds, or null when none can be made.
    @SuppressWarnings("unchecked")
    private static Object other(java.lang.reflect.Field f, Object current) throws Exception {
        Class<?> t = f.getType();
        if (t == int.class) return ((Integer) current) + 1;
        if (t == long.class) return ((Long) current) + 1;
        if (t == short.class) return (short) (((Short) current) + 1);
        if (t == byte.class) return (byte) (((Byte) current) + 1);
        if (t == double.class) return ((Double) current) + 1.5;
        if (t == boolean.class) return !((Boolean) current);
        if (t == String.class) return current == null || !current.equals("") ? "" : "x";
        if (t == org.apache.kafka.common.Uuid.class) return org.apache.kafka.common.Uuid.randomUuid();
        if (t == byte[].class) return current == null ? new byte[0] : null;
        if (current == null && java.util.Collection.class.isAssignableFrom(t)) {
            return t.isInterface() ? new java.util.ArrayList<>() : t.getConstructor().newInstance();
        }
        if (java.util.Collection.class.isAssignableFrom(t)) {
            Class<?> elem = element(f.getGenericType(), t);
            java.util.Collection<Object> c = t.isInterface() ? new java.util.ArrayList<>()
                : (java.util.Collection<Object>) t.getConstructor().newInstance();
            if (elem == String.class) c.add("x");
            else if (elem == Integer.class) c.add(1);
            else if (elem == Long.class) c.add(1L);
            else if (elem == Short.class) c.add((short) 1);
            else if (elem == org.apache.kafka.common.Uuid.class) c.add(org.apache.kafka.common.Uuid.randomUuid());
            else if (elem != null && org.apache.kafka.common.protocol.Message.class.isAssignableFrom(elem)) c.add(fresh(elem));
            else return null;
            return c;
        }
        if (current == null && org.apache.kafka.common.protocol.Message.class.isAssignableFrom(t)) {
            return fresh(t);
        }
        return null;
    }

    private static void probe(ApiMessageType api, boolean request, String rootClass) throws Exception {
        java.util.List<String> classes = new java.util.ArrayList<>();
        for (String c : CLASSES.keySet()) {
            if (c.equals(rootClass) || c.startsWith(rootClass + "$")) classes.add(c);
        }
        for (String cls : classes) {
            for (java.lang.reflect.Field f : Class.forName(cls).getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) || f.isSynthetic()) continue;
                if (f.getName().startsWith("_") || f.getName().equals("next") || f.getName().equals("prev")) continue;
                f.setAccessible(true);
                StringBuilder refused = new StringBuilder();
                boolean made = false;
                for (int v = api.lowestSupportedVersion(); v <= api.highestSupportedVersion(true); v++) {
                    org.apache.kafka.common.protocol.ApiMessage root =
                        request ? api.newRequest() : api.newResponse();
                    Object holder = reach(root, cls);
                    if (holder == null) break;
                    Object value = other(f, f.get(holder));
                    if (value == null) break;
                    made = true;
                    f.set(holder, value);
                    try {
                        org.apache.kafka.common.protocol.MessageUtil.toByteBufferAccessor(root, (short) v);
                    } catch (org.apache.kafka.common.errors.UnsupportedVersionException x) {
                        String text = String.valueOf(x.getMessage());
                        if (text.contains("non-default " + f.getName() + " ")) {
                            if (refused.length() > 0) refused.append(", ");
                            refused.append(v);
                        }
                    } catch (RuntimeException x) {
                        // another field of the message cannot be written at v: not this field's fact
                    }
                }
                if (!made) continue;
                if (REFUSED.length() > 0) REFUSED.append(",\n");
                REFUSED.append(quote(cls + "#" + f.getName())).append(": [").append(refused).append("]");
            }
        }
    }

    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder("{\"apis\": {\n");
        ApiMessageType[] all = ApiMessageType.values();
        for (int i = 0; i < all.length; i++) {
            ApiMessageType api = all[i];
            int lowest = api.lowestSupportedVersion();
            int highest = api.highestSupportedVersion(true);
            out.append(quote(String.valueOf(api.apiKey()))).append(": {")
                .append("\"name\": ").append(quote(api.name))
                .append(", \"lowest\": ").append(lowest)
                .append(", \"highest\": ").append(highest)
                .append(", \"unstable\": ").append(api.latestVersionUnstable())
                .append(", \"request\": ").append(versions(api.requestSchemas(), lowest, highest))
                .append(", \"response\": ").append(versions(api.responseSchemas(), lowest, highest))
                .append(", \"requestClass\": ").append(quote(className(api, true)))
                .append(", \"responseClass\": ").append(quote(className(api, false)))
                .append("}").append(i < all.length - 1 ? ",\n" : "\n");
        }
        out.append("},\n\"classes\": {\n");
        int n = 0;
        for (Map.Entry<String, String> e : CLASSES.entrySet()) {
            out.append(quote(e.getKey())).append(": ").append(e.getValue())
                .append(++n < CLASSES.size() ? ",\n" : "\n");
        }
        out.append("},\n\"refused\": {\n").append(REFUSED).append("\n}");
        System.out.print(out.append("}\n"));
    }
}
