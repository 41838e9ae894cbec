# cython: language_level=3, boundscheck=False, wraparound=False
"""Arrow columns straight from the decoded objects' slots, for kwire.spark.model's scalar columns.

kwire.spark.model builds a scalar column as `pa.array(list(map(attrgetter(attr), objs)), type)`: two
passes through Python objects per value. `scalar` reads each object's slot in C and writes the
Arrow buffers (validity, values; offsets and bytes for strings and binaries) directly. It
returns None for anything it does not expect (an object of another class, an unset slot, a
value of another type or range), and the caller then builds the column the Python way, which
gives the same array. `make setup` builds it in place (kwire.spark._columns), the wheel carries it;
without it the Python way serves alone.
"""

from cpython.object cimport PyObject
from libc.stdint cimport INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t
from libc.string cimport memcpy

import pyarrow as pa

cdef extern from "Python.h":
    bint PyLong_CheckExact(object o)
    bint PyBool_Check(object o)
    bint PyFloat_CheckExact(object o)
    bint PyUnicode_CheckExact(object o)
    bint PyBytes_CheckExact(object o)
    long long PyLong_AsLongLong(object o) except? -1
    double PyFloat_AS_DOUBLE(object o)
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    char* PyBytes_AS_STRING(object o)
    Py_ssize_t PyBytes_GET_SIZE(object o)

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member

DEF _T_OBJECT_EX = 16
API = 1  # kwire.spark.model checks it: a build of an older interface is not used

cdef dict _OFFSETS = {}  # (class, attr) -> slot offset, or -1 when attr is not an object slot


cdef Py_ssize_t _offset(object cls, str attr):
    key = (cls, attr)
    found = _OFFSETS.get(key)
    if found is not None:
        return found
    cdef Py_ssize_t off = -1
    desc = getattr(cls, "__dict__", {}).get(attr)
    if desc is not None and type(desc).__name__ == "member_descriptor":
        if (<PyMemberDescrObject*>desc).d_member.type == _T_OBJECT_EX:
            off = (<PyMemberDescrObject*>desc).d_member.offset
    _OFFSETS[key] = off
    return off


# Value kinds: the Arrow type kwire.spark.model gives each schema scalar (uint16 widens to int32,
# uint32 to int64; Spark has no unsigned types).
_KINDS = {
    "bool": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "uint16": 3, "uint32": 4,
    "float64": 5, "string": 6, "bytes": 7, "records": 7,
}  # fmt: skip
cdef int _WIDTH[8]
_WIDTH[:] = [0, 1, 2, 4, 8, 8, 0, 0]
cdef long long _LOW[5]
cdef long long _HIGH[5]
_LOW[:] = [0, -128, -32768, -2147483648, 0]
_LOW[4] = INT64_MIN
_HIGH[:] = [1, 127, 32767, 2147483647, 9223372036854775807]


def kind_of(str schema_type):
    """The kind `scalar` takes for a schema scalar type, or None (uuid and others: Python)."""
    return _KINDS.get(schema_type)


def scalar(object rows, str attr, int kind, object arrow_type):
    """The column of `attr` over rows (a list; None rows and None values are nulls), or None."""
    if not isinstance(rows, list):
        return None
    cdef list objs = <list>rows  # kwire.spark.model's Dense is a list
    cdef Py_ssize_t n = len(objs), i, nulls = 0, total = 0, ln, off = -1
    cdef object cls = None
    cdef PyObject* slot
    cdef const char* cs
    cdef long long x
    if n == 0:
        return None
    values = [None] * n  # the slot values, read once
    for i in range(n):
        o = objs[i]
        if o is None:
            nulls += 1
            continue
        if cls is None:
            cls = type(o)
            off = _offset(cls, attr)
            if off < 0:
                return None
        elif type(o) is not cls:
            return None
        slot = (<PyObject**>((<char*><PyObject*>o) + off))[0]
        if slot == NULL:
            return None
        v = <object>slot
        if v is None:
            nulls += 1
            continue
        if kind == 0:
            if not PyBool_Check(v):
                return None
        elif kind <= 4:
            if not PyLong_CheckExact(v):
                return None
            x = PyLong_AsLongLong(v)
            if x < _LOW[kind] or x > _HIGH[kind]:
                return None
        elif kind == 5:
            if not PyFloat_CheckExact(v):
                return None
        elif kind == 6:
            if not PyUnicode_CheckExact(v):
                return None
            PyUnicode_AsUTF8AndSize(v, &ln)
            total += ln
        else:
            if not PyBytes_CheckExact(v):
                return None
            total += PyBytes_GET_SIZE(v)
        values[i] = v
    if total > 2147483647:
        return None  # past int32 offsets: the Python way decides
    validity = None
    cdef uint8_t* vb = NULL
    if nulls:
        validity = pa.allocate_buffer((n + 7) // 8)
        vb = <uint8_t*><size_t>validity.address
        for i in range((n + 7) // 8):
            vb[i] = 0
    cdef int width = _WIDTH[kind]
    cdef uint8_t* p = NULL
    cdef int32_t* offs = NULL
    cdef char* dp = NULL
    cdef int32_t at = 0
    if kind == 0:
        data = pa.allocate_buffer((n + 7) // 8)
        p = <uint8_t*><size_t>data.address
        for i in range((n + 7) // 8):
            p[i] = 0
    elif kind <= 5:
        data = pa.allocate_buffer(n * width)
        p = <uint8_t*><size_t>data.address
    else:
        offsets = pa.allocate_buffer((n + 1) * 4)
        offs = <int32_t*><size_t>offsets.address
        data = pa.allocate_buffer(max(total, 1))
        dp = <char*><size_t>data.address
        offs[0] = 0
    for i in range(n):
        v = values[i]
        if v is None:
            if kind <= 5 and kind != 0:
                for x in range(width):
                    p[i * width + x] = 0
            elif kind >= 6:
                offs[i + 1] = at
            continue
        if vb != NULL:
            vb[i >> 3] |= 1 << (i & 7)
        if kind == 0:
            if v is True:
                p[i >> 3] |= 1 << (i & 7)
        elif kind == 1:
            (<int8_t*>p)[i] = <int8_t>PyLong_AsLongLong(v)
        elif kind == 2:
            (<int16_t*>p)[i] = <int16_t>PyLong_AsLongLong(v)
        elif kind == 3:
            (<int32_t*>p)[i] = <int32_t>PyLong_AsLongLong(v)
        elif kind == 4:
            (<int64_t*>p)[i] = <int64_t>PyLong_AsLongLong(v)
        elif kind == 5:
            (<double*>p)[i] = PyFloat_AS_DOUBLE(v)
        else:
            if kind == 6:
                cs = PyUnicode_AsUTF8AndSize(v, &ln)
            else:
                cs = PyBytes_AS_STRING(v)
                ln = PyBytes_GET_SIZE(v)
            memcpy(dp + at, cs, ln)
            at += ln
            offs[i + 1] = at
    if kind >= 6:
        return pa.Array.from_buffers(arrow_type, n, [validity, offsets, data], null_count=nulls)
    return pa.Array.from_buffers(arrow_type, n, [validity, data], null_count=nulls)


def any_tags(object objs):
    """Whether any object holds unknown tags (the unknown_tags column is all null if not)."""
    for o in objs:
        if o is not None and o.unknown_tags:
            return True
    return False
