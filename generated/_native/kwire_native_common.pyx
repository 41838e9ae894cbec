# The compiled readers' runtime (copied into generated/_native by the generator).
# cython: language_level=3
"""What every compiled reader module shares: slot offsets, and the two exceptions that send a
read back to Python (a tagged section to read: the Python fast reader; anything else: the
module's checked decoder, through decode's own fallback)."""


cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member

# structmember.h's T_OBJECT_EX: an object slot that raises AttributeError while empty.
DEF _T_OBJECT_EX = 16


class _Fallback(Exception):
    """The compiled reader hands this read to the Python fast reader."""


class _Recheck(Exception):
    """The checked decoder must read this body (it names the field and byte offset)."""


cdef Py_ssize_t _offset(object cls, str attr) except -1:
    """The byte offset of a __slots__ attribute in cls's instances (its member descriptor)."""
    desc = cls.__dict__[attr]
    if type(desc).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__name__}.{attr} is not a slot")
    cdef PyMemberDef* m = (<PyMemberDescrObject*>desc).d_member
    if m.type != _T_OBJECT_EX:
        raise TypeError(f"{cls.__name__}.{attr} is not an object slot")
    return m.offset


# -- the runtime helpers, compiled ----------------------------------------------------------------

from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.stdint cimport INT64_MIN, int64_t, uint64_t
from uuid import UUID, SafeUUID

cdef extern from "Python.h":
    object _PyLong_FromByteArray(const unsigned char* b, size_t n, int little_endian, int signed)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyBytes_FromStringAndSize(const char* v, Py_ssize_t size)
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t nitems)
    object PyLong_FromLongLong(long long v)

# uuid.UUID keeps its value in two slots: what UUID(bytes=...) stores, stored directly.
cdef Py_ssize_t _UUID_INT = _offset(UUID, "int")
cdef Py_ssize_t _UUID_SAFE = _offset(UUID, "is_safe")
cdef object _SAFE_UNKNOWN = SafeUUID.unknown


cdef inline void _set(object o, Py_ssize_t off, object v):
    Py_INCREF(v)
    (<PyObject**>((<char*><PyObject*>o) + off))[0] = <PyObject*>v


cdef inline int64_t _len32(const unsigned char* d, Py_ssize_t n, Py_ssize_t* pos, int width) except? -2:
    """A classic length (int16 or int32) at pos, moving past it."""
    cdef Py_ssize_t p = pos[0]
    cdef int64_t v
    if width > n - p:
        raise IndexError("short")
    if width == 2:
        v = <short>((d[p] << 8) | d[p + 1])
    else:
        v = <int>((<unsigned int>d[p] << 24) | (<unsigned int>d[p + 1] << 16)
                  | (<unsigned int>d[p + 2] << 8) | d[p + 3])
    pos[0] = p + width
    return v


cdef inline int64_t _ulen(const unsigned char* d, Py_ssize_t n, Py_ssize_t* pos) except? -2:
    """A compact length (uvarint, at most 5 bytes, 32 bits kept as Kafka does) minus one."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef unsigned char b
    cdef Py_ssize_t p = pos[0]
    while True:
        if p >= n or shift > 28:
            raise IndexError("varint")
        b = d[p]
        p += 1
        value |= <uint64_t>(b & 0x7F) << shift
        if b < 0x80:
            pos[0] = p
            return <int64_t>(value & 0xFFFFFFFF) - 1
        shift += 7


cdef object _n_uuid(const unsigned char* d, Py_ssize_t n, Py_ssize_t* pos):
    cdef Py_ssize_t p = pos[0]
    if 16 > n - p:
        raise IndexError("short")
    u = PyType_GenericAlloc(<PyTypeObject*>UUID, 0)
    _set(u, _UUID_INT, _PyLong_FromByteArray(d + p, 16, 0, 0))
    _set(u, _UUID_SAFE, _SAFE_UNKNOWN)
    pos[0] = p + 16
    return u


cdef object _n_bytes(const unsigned char* d, Py_ssize_t n, Py_ssize_t* pos, bint compact,
                     bint nullable):
    cdef int64_t ln = _ulen(d, n, pos) if compact else _len32(d, n, pos, 4)
    if ln < 0:
        if nullable:
            return None
        raise ValueError("null")
    if ln > n - pos[0]:
        raise IndexError("short")
    v = PyBytes_FromStringAndSize(<const char*>d + pos[0], ln)
    pos[0] += ln
    return v


cdef object _n_array(const unsigned char* d, Py_ssize_t n, Py_ssize_t* pos, bint compact,
                     bint nullable, int elem):
    cdef int64_t k = _ulen(d, n, pos) if compact else _len32(d, n, pos, 4)
    cdef Py_ssize_t p, i
    cdef int64_t ln
    cdef int width
    if k < 0:
        if nullable:
            return None
        raise ValueError("null")
    p = pos[0]
    if k > n - p:
        raise IndexError("short")
    lst = PyList_New(k)
    if elem <= _E_INT64:
        width = 1 if elem == _E_INT8 else 2 if elem == _E_INT16 else 4 if elem == _E_INT32 else 8
        if k * width > n - p:
            raise IndexError("short")
        for i in range(k):
            if elem == _E_INT8:
                item = PyLong_FromLongLong(<signed char>d[p])
            elif elem == _E_INT16:
                item = PyLong_FromLongLong(<short>((d[p] << 8) | d[p + 1]))
            elif elem == _E_INT32:
                item = PyLong_FromLongLong(<int>((<unsigned int>d[p] << 24)
                    | (<unsigned int>d[p + 1] << 16) | (<unsigned int>d[p + 2] << 8) | d[p + 3]))
            else:
                item = PyLong_FromLongLong(<long long>(
                    (<uint64_t>d[p] << 56) | (<uint64_t>d[p + 1] << 48) | (<uint64_t>d[p + 2] << 40)
                    | (<uint64_t>d[p + 3] << 32) | (<uint64_t>d[p + 4] << 24)
                    | (<uint64_t>d[p + 5] << 16) | (<uint64_t>d[p + 6] << 8) | d[p + 7]))
            p += width
            Py_INCREF(item)
            PyList_SET_ITEM(lst, i, item)
        pos[0] = p
        return lst
    for i in range(k):
        if elem == _E_UUID:
            item = _n_uuid(d, n, pos)
        else:
            if elem == _E_COMPACT_STRING:
                ln = _ulen(d, n, pos)
                if ln > _MAX_STRING_BYTES:
                    raise ValueError("too long")
            else:
                ln = _len32(d, n, pos, 2)
            if ln < 0:
                raise ValueError("null")
            if ln > n - pos[0]:
                raise IndexError("short")
            item = PyUnicode_DecodeUTF8(<const char*>d + pos[0], ln, NULL)
            pos[0] += ln
        Py_INCREF(item)
        PyList_SET_ITEM(lst, i, item)
    return lst


# -- fresh default structs ------------------------------------------------------------------------

import dataclasses

cdef dict _PLANS = {}
# How _fresh fills a slot: the dataclass default itself (immutable), a new list or dict, a
# fresh default of a nested struct, or the default factory called (anything else).
cdef enum:
    _K_VALUE = 0
    _K_LIST = 1
    _K_DICT = 2
    _K_STRUCT = 3
    _K_CALL = 4


from cpython.mem cimport PyMem_Malloc


cdef class _Plan:
    """How to make cls() and how to test against it, slot by slot, in C arrays."""

    cdef Py_ssize_t n
    cdef Py_ssize_t* offs
    cdef int* kinds
    cdef bint* compared
    cdef list values  # the default, nested class or factory per slot (None for a list or dict)
    cdef object cls

    def __cinit__(self, object cls):
        self.cls = cls
        fields = dataclasses.fields(cls)
        self.n = len(fields)
        self.offs = <Py_ssize_t*>PyMem_Malloc(max(self.n, 1) * sizeof(Py_ssize_t))
        self.kinds = <int*>PyMem_Malloc(max(self.n, 1) * sizeof(int))
        self.compared = <bint*>PyMem_Malloc(max(self.n, 1) * sizeof(bint))
        if not (self.offs and self.kinds and self.compared):
            raise MemoryError()
        self.values = []
        for i, f in enumerate(fields):
            self.offs[i] = _offset(cls, f.name)
            self.compared[i] = f.compare
            value = None
            if f.default is not dataclasses.MISSING:
                self.kinds[i], value = _K_VALUE, f.default
            elif f.default_factory is list:
                self.kinds[i] = _K_LIST
            elif f.default_factory is dict:
                self.kinds[i] = _K_DICT
            elif dataclasses.is_dataclass(f.default_factory) and "__slots__" in vars(
                f.default_factory
            ):
                self.kinds[i], value = _K_STRUCT, f.default_factory
            else:
                self.kinds[i], value = _K_CALL, f.default_factory
            self.values.append(value)

    def __dealloc__(self):
        PyMem_Free(self.offs)
        PyMem_Free(self.kinds)
        PyMem_Free(self.compared)


cdef inline _Plan _plan_of(object cls):
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _Plan(cls)
    return <_Plan>plan


cdef object _plan(object cls):
    """cls's plan, for a module to keep (its _fresh_in calls then skip the lookup)."""
    return _plan_of(cls)


cdef object _fresh(object cls):
    """What cls() returns (a generated struct with every field at its default), without the
    dataclass __init__: the default read of a tagged or absent struct field."""
    return _fresh_in(_plan_of(cls))


cdef object _fresh_in(object p):
    """_fresh of the class whose plan p is (from _plan)."""
    cdef _Plan plan = <_Plan>p
    cdef Py_ssize_t i
    cdef int kind
    o = PyType_GenericAlloc(<PyTypeObject*>plan.cls, 0)
    for i in range(plan.n):
        kind = plan.kinds[i]
        if kind == _K_VALUE:
            _set(o, plan.offs[i], plan.values[i])
        elif kind == _K_LIST:
            _set(o, plan.offs[i], [])
        elif kind == _K_DICT:
            _set(o, plan.offs[i], {})
        elif kind == _K_STRUCT:
            _set(o, plan.offs[i], _fresh(plan.values[i]))
        else:
            _set(o, plan.offs[i], plan.values[i]())
    return o


cdef bint _is_default(object v, object cls) except -1:
    """Whether v == cls() for certain (the test the Python writer makes before writing a tagged
    struct); False when unsure, which sends the write to Python."""
    cdef _Plan plan
    cdef Py_ssize_t i
    cdef int kind
    cdef PyObject* slot
    if type(v) is not cls:
        return False
    plan = _plan_of(cls)
    for i in range(plan.n):
        if not plan.compared[i]:
            continue
        slot = (<PyObject**>((<char*><PyObject*>v) + plan.offs[i]))[0]
        if slot == NULL:
            return False
        x = <object>slot
        kind = plan.kinds[i]
        if kind == _K_VALUE:
            value = plan.values[i]
            if not (x is value or x == value):
                return False
        elif kind == _K_LIST:
            if not (type(x) is list and len(<list>x) == 0):
                return False
        elif kind == _K_DICT:
            if not (type(x) is dict and len(<dict>x) == 0):
                return False
        elif kind == _K_STRUCT:
            if not _is_default(x, plan.values[i]):
                return False
        else:
            return False
    return True


# -- the runtime writers, compiled ----------------------------------------------------------------

cdef extern from *:
    """
    /* An int's 16 big-endian bytes (CPython's own routine; 3.13 added an argument). */
    #if PY_VERSION_HEX >= 0x030D0000
    #define kwire_uuid_bytes(v, b) _PyLong_AsByteArray((PyLongObject*)(v), (b), 16, 0, 0, 1)
    #else
    #define kwire_uuid_bytes(v, b) _PyLong_AsByteArray((PyLongObject*)(v), (b), 16, 0, 0)
    #endif
    """
    int kwire_uuid_bytes(object v, unsigned char* b) except -1


cdef int _nw_uuid(_Buf* b, object v) except -1:
    if type(v) is not UUID:
        raise TypeError("not a uuid.UUID")
    cdef PyObject* slot = (<PyObject**>((<char*><PyObject*>v) + _UUID_INT))[0]
    if slot == NULL or not PyLong_CheckExact(<object>slot):
        raise TypeError("not a uuid")
    _grow(b, 16)
    kwire_uuid_bytes(<object>slot, <unsigned char*>b.p + b.n)
    b.n += 16
    return 0


cdef inline int _nw_len(_Buf* b, Py_ssize_t n, bint compact, int width) except -1:
    if compact:
        return _w_uvarint(b, n + 1)
    return _w_be(b, <uint64_t>n, width)


cdef inline int _nw_null(_Buf* b, bint compact, bint nullable) except -1:
    """A null bytes field or array: length -1 (0 compact), refused where the field is not
    nullable (the Python writer then raises the error that names it)."""
    if not nullable:
        raise TypeError("null")
    if compact:
        return _w_u8(b, 0)
    return _w_be(b, 0xFFFFFFFF, 4)


cdef int _nw_bytes(_Buf* b, object v, bint compact, bint nullable) except -1:
    cdef Py_ssize_t ln
    if v is None:
        return _nw_null(b, compact, nullable)
    if not PyBytes_CheckExact(v):
        raise TypeError("not bytes")
    ln = PyBytes_GET_SIZE(v)
    _nw_len(b, ln, compact, 4)
    return _w_raw(b, PyBytes_AS_STRING(v), ln)


cdef int _nw_array(_Buf* b, object v, bint compact, bint nullable, int elem) except -1:
    cdef Py_ssize_t ln
    cdef const char* cs
    if v is None:
        return _nw_null(b, compact, nullable)
    if not PyList_CheckExact(v):
        raise TypeError("not a list")
    _nw_len(b, len(<list>v), compact, 4)
    for item in <list>v:
        if elem == _E_INT8:
            _w_be(b, <uint64_t>_int_in(item, -128, 127), 1)
        elif elem == _E_INT16:
            _w_be(b, <uint64_t>_int_in(item, -32768, 32767), 2)
        elif elem == _E_INT32:
            _w_be(b, <uint64_t>_int_in(item, -2147483648, 2147483647), 4)
        elif elem == _E_INT64:
            _w_be(b, <uint64_t>_int_in(item, INT64_MIN, 9223372036854775807), 8)
        elif elem == _E_UUID:
            _nw_uuid(b, item)
        else:
            if not PyUnicode_CheckExact(item):
                raise TypeError("not a str")
            cs = PyUnicode_AsUTF8AndSize(item, &ln)
            if ln > _MAX_STRING_BYTES:
                raise ValueError("too long")
            _nw_len(b, ln, elem == _E_COMPACT_STRING, 2)
            _w_raw(b, cs, ln)
    return 0


# -- frames ---------------------------------------------------------------------------------------

from cpython.pycapsule cimport PyCapsule_GetPointer

ctypedef object (*_reader_t)(bytes, Py_ssize_t*, int)


cdef class _Route:
    cdef _reader_t header
    cdef _reader_t body
    cdef int header_version


cdef class FrameRoutes:
    """A frame's header and body read by the compiled modules' readers in one C call: the
    common case of decode_request / decode_response. None means "not here" (an api or version
    without a compiled reader, or anything unusual about the frame): the Python frame decoder
    then reads it, fast path and checked, and raises its errors."""

    cdef dict routes  # (api key << 16 | version) -> _Route

    def __init__(self, dict table):
        """table: {(api key, version): (header READ capsule, header version, body READ capsule)}."""
        cdef _Route r
        self.routes = {}
        for (api_key, version), (header, header_version, body) in table.items():
            r = _Route()
            r.header = <_reader_t>PyCapsule_GetPointer(header, "kwire_native.read")
            r.body = <_reader_t>PyCapsule_GetPointer(body, "kwire_native.read")
            r.header_version = header_version
            self.routes[(api_key << 16) | (version & 0xFFFF)] = r

    def __len__(self):
        return len(self.routes)

    cdef object _both(self, bytes data, long key, int version):
        cdef Py_ssize_t pos = 0
        cdef _Route r
        route = self.routes.get(key)
        if route is None:
            return None
        r = <_Route>route
        try:
            header = r.header(data, &pos, r.header_version)
            body = r.body(data, &pos, version)
        except Exception:
            return None
        if pos != len(data):
            return None
        return header, body

    def request(self, frame):
        """(header, body) of a request frame, or None (see the class)."""
        cdef bytes data = frame if type(frame) is bytes else bytes(frame)
        cdef const unsigned char* d = data
        cdef int api_key, version
        if len(data) < 4:
            return None
        api_key = <short>((d[0] << 8) | d[1])
        version = <short>((d[2] << 8) | d[3])
        return self._both(data, (api_key << 16) | (version & 0xFFFF), version)

    def response(self, frame, int api_key, int api_version):
        """(header, body) of a response frame to a request of this key and version, or None."""
        cdef bytes data = frame if type(frame) is bytes else bytes(frame)
        if not (-32768 <= api_key <= 32767 and -32768 <= api_version <= 32767):
            return None
        return self._both(data, (api_key << 16) | (api_version & 0xFFFF), api_version)
