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
