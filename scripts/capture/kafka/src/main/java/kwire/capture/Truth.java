package kwire.capture;

import java.io.BufferedWriter;
import java.io.Closeable;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Ground truth of a capture scenario, as the clients' own APIs report it: one JSON object per line
 * (events), written and flushed at once so that a process killed with SIGKILL leaves every event it
 * had. Each event has "t" (epoch milliseconds with a fraction), "client_id" and "event".
 */
final class Truth implements Closeable {
    private final BufferedWriter out;
    final String process;

    Truth(Path file, String process) throws IOException {
        this.out = Files.newBufferedWriter(file, StandardCharsets.UTF_8);
        this.process = process;
    }

    /** Epoch milliseconds with microseconds (Instant.now() on Linux has them). */
    static double now() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1000.0 + i.getNano() / 1_000_000.0;
    }

    /** An event: fields come as name, value pairs. */
    Map<String, Object> event(String clientId, String event, Object... fields) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("t", now());
        e.put("client_id", clientId);
        e.put("event", event);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            e.put((String) fields[i], fields[i + 1]);
        }
        write(e);
        return e;
    }

    synchronized void write(Map<String, Object> e) {
        try {
            out.write(json(e));
            out.write('\n');
            out.flush();
        } catch (IOException ex) {
            throw new RuntimeException(ex);
        }
    }

    @Override
    public synchronized void close() throws IOException {
        out.close();
    }

    static Map<String, Object> map(Object... fields) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < fields.length; i += 2) {
            m.put((String) fields[i], fields[i + 1]);
        }
        return m;
    }

    static String error(Throwable e) {
        if (e == null) {
            return null;
        }
        Throwable t = e;
        while ((t instanceof java.util.concurrent.ExecutionException
                        || t instanceof java.util.concurrent.CompletionException)
                && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    // -- a small JSON writer (no library needed) ------------------------------------------------

    static String json(Object o) {
        StringBuilder sb = new StringBuilder();
        write(sb, o);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object o) {
        if (o instanceof Optional<?> opt) {
            o = opt.orElse(null);
        }
        if (o == null) {
            sb.append("null");
        } else if (o instanceof String s) {
            quote(sb, s);
        } else if (o instanceof Double d) {
            sb.append(d.isNaN() || d.isInfinite() ? "null" : stripDouble(d));
        } else if (o instanceof Number || o instanceof Boolean) {
            sb.append(o);
        } else if (o instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> en : m.entrySet()) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                quote(sb, String.valueOf(en.getKey()));
                sb.append(": ");
                write(sb, en.getValue());
            }
            sb.append('}');
        } else if (o instanceof Collection<?> c) {
            sb.append('[');
            boolean first = true;
            for (Object x : c) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                write(sb, x);
            }
            sb.append(']');
        } else if (o instanceof Object[] arr) {
            write(sb, List.of(arr));
        } else {
            quote(sb, o.toString());
        }
    }

    private static String stripDouble(double d) {
        // Three decimals: microseconds of an epoch-millisecond time.
        return String.format(java.util.Locale.ROOT, "%.3f", d);
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            switch (ch) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (ch < 0x20) {
                        sb.append(String.format("\\u%04x", (int) ch));
                    } else {
                        sb.append(ch);
                    }
                }
            }
        }
        sb.append('"');
    }

    static List<Object> list(Object... items) {
        return new ArrayList<>(List.of(items));
    }
}
