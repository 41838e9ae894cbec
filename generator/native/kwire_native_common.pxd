# The compiled readers' runtime (copied into generated/_native by the generator).
# cython: language_level=3
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyBytes_FromStringAndSize(const char* v, Py_ssize_t size)
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t nitems)


cdef Py_ssize_t _offset(object cls, str attr) except -1


# Kafka's limit on a string's UTF-8 length (the Python runtime's MAX_STRING_BYTES): a longer
# compact string is the checked decoder's to refuse.
cdef enum:
    _MAX_STRING_BYTES = 32767

# Element kinds of the arrays _n_array reads (the runtime helpers' element readers).
cdef enum:
    _E_INT8 = 1
    _E_INT16 = 2
    _E_INT32 = 3
    _E_INT64 = 4
    _E_STRING = 5
    _E_COMPACT_STRING = 6
    _E_UUID = 7

# The runtime helpers a value's read would otherwise call in Python (r_uuid, r_*bytes,
# r_*array of integers, strings and uuids), in C; the same values, or an exception that sends
# the body to the checked decoder.
cdef object _fresh(object cls)
cdef object _plan(object cls)
cdef object _fresh_in(object plan)
cdef bint _is_default(object v, object cls) except -1
cdef object _n_uuid(const unsigned char* d, Py_ssize_t n, Py_ssize_t* pos)
cdef object _n_bytes(const unsigned char* d, Py_ssize_t n, Py_ssize_t* pos, bint compact,
                     bint nullable)
cdef object _n_array(const unsigned char* d, Py_ssize_t n, Py_ssize_t* pos, bint compact,
                     bint nullable, int elem)


cdef inline object _alloc(object cls):
    """A new instance without __init__ (as object.__new__), every slot empty."""
    return PyType_GenericAlloc(<PyTypeObject*>cls, 0)


cdef inline void _put(object o, Py_ssize_t off, object v):
    """Stores v in an empty slot of a new instance (the slot's offset from _offset)."""
    Py_INCREF(v)
    (<PyObject**>((<char*><PyObject*>o) + off))[0] = <PyObject*>v


cdef inline int _need(Py_ssize_t pos, Py_ssize_t k, Py_ssize_t n) except -1:
    if k > n - pos:
        raise IndexError("short")
    return 0


cdef inline int16_t _i16(const unsigned char* p):
    return <int16_t>((<uint16_t>p[0] << 8) | p[1])


cdef inline uint16_t _u16(const unsigned char* p):
    return <uint16_t>((<uint16_t>p[0] << 8) | p[1])


cdef inline uint32_t _u32(const unsigned char* p):
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline int32_t _i32(const unsigned char* p):
    return <int32_t>_u32(p)


cdef inline int64_t _i64(const unsigned char* p):
    return <int64_t>((<uint64_t>_u32(p) << 32) | _u32(p + 4))


cdef inline double _f64(const unsigned char* p):
    cdef uint64_t u = (<uint64_t>_u32(p) << 32) | _u32(p + 4)
    cdef double x
    memcpy(&x, &u, 8)
    return x


cdef inline int64_t _uvarint(const unsigned char* d, Py_ssize_t n, Py_ssize_t* pos) except -1:
    """An unsigned varint of at most 5 bytes (Kafka's compact lengths and counts)."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef unsigned char b
    while True:
        if pos[0] >= n or shift > 28:
            raise IndexError("varint")
        b = d[pos[0]]
        pos[0] += 1
        value |= <uint64_t>(b & 0x7F) << shift
        if b < 0x80:
            return <int64_t>value
        shift += 7


cdef inline object _utf8(const unsigned char* p, Py_ssize_t ln):
    return PyUnicode_DecodeUTF8(<const char*>p, ln, NULL)


cdef inline object _bytes(const unsigned char* p, Py_ssize_t ln):
    return PyBytes_FromStringAndSize(<const char*>p, ln)


# -- writing ----------------------------------------------------------------------------------------

from cpython.mem cimport PyMem_Free, PyMem_Realloc


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    bint PyUnicode_CheckExact(object o)
    bint PyBytes_CheckExact(object o)
    bint PyLong_CheckExact(object o)
    bint PyFloat_CheckExact(object o)
    bint PyList_CheckExact(object o)
    long long PyLong_AsLongLong(object o) except? -1
    double PyFloat_AS_DOUBLE(object o)
    char* PyBytes_AS_STRING(object o)
    Py_ssize_t PyBytes_GET_SIZE(object o)


cdef struct _Buf:
    char* p
    Py_ssize_t n
    Py_ssize_t cap


cdef inline int _grow(_Buf* b, Py_ssize_t k) except -1:
    cdef Py_ssize_t cap
    cdef char* p
    if b.n + k <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 256
    if cap < b.n + k:
        cap = b.n + k
    p = <char*>PyMem_Realloc(b.p, cap)
    if p == NULL:
        raise MemoryError()
    b.p = p
    b.cap = cap
    return 0


cdef inline object _get(object o, Py_ssize_t off):
    """The value in a slot of o (AttributeError when it was never set)."""
    cdef PyObject* v = (<PyObject**>((<char*><PyObject*>o) + off))[0]
    if v == NULL:
        raise AttributeError("unset slot")
    return <object>v


cdef inline int _w_u8(_Buf* b, unsigned char x) except -1:
    _grow(b, 1)
    b.p[b.n] = <char>x
    b.n += 1
    return 0


cdef inline int _w_be(_Buf* b, uint64_t x, int width) except -1:
    cdef int i
    _grow(b, width)
    for i in range(width):
        b.p[b.n + i] = <char>((x >> (8 * (width - 1 - i))) & 0xFF)
    b.n += width
    return 0


cdef inline int _w_raw(_Buf* b, const char* s, Py_ssize_t n) except -1:
    _grow(b, n)
    memcpy(b.p + b.n, s, n)
    b.n += n
    return 0


cdef inline int _w_uvarint(_Buf* b, uint64_t x) except -1:
    while x >= 0x80:
        _w_u8(b, <unsigned char>((x & 0x7F) | 0x80))
        x >>= 7
    return _w_u8(b, <unsigned char>x)


cdef inline int64_t _int_in(object v, int64_t low, int64_t high) except? -1:
    """An exact int within [low, high]; anything else goes back to Python (bool and other
    integer types included: the Python writers decide what they mean)."""
    cdef long long x
    if not PyLong_CheckExact(v):
        raise TypeError("not an exact int")
    x = PyLong_AsLongLong(v)
    if x < low or x > high:
        raise OverflowError("out of range")
    return x


# The runtime writers a value's write would otherwise call in Python, in C: exact types only
# (anything else raises, and the Python encoder writes the body and raises its errors).
cdef int _nw_uuid(_Buf* b, object v) except -1
cdef int _nw_bytes(_Buf* b, object v, bint compact, bint nullable) except -1
cdef int _nw_array(_Buf* b, object v, bint compact, bint nullable, int elem) except -1
