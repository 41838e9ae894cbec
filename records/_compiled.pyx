# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled twin of records.decode._read_v2_records: the loop over a v2 batch's records.

It reads the common case (well-formed records, varints of the sizes Kafka writes, headers) in
C and builds the same Record objects, slot by slot.  Anything else -- a fault of any kind, a
control batch, a varint of unusual length, arithmetic that would leave 64 bits -- takes back
what it appended and hands the whole call to the Python reader, so errors (text, byte offset,
field) and results are the reference's by construction.  `make setup` builds it
(scripts/build_native.py); without it records.decode uses the Python reader alone.
"""

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int64_t, uint64_t

cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyBytes_FromStringAndSize(const char* v, Py_ssize_t size)
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t nitems)
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
DEF _INT32_MAX = 2147483647
DEF _SAFE = 4611686018427387904  # 2**62: sums of two values inside it stay inside int64


API = 1  # records.decode checks it: a build of an older interface is not used

cdef object _python_reader = None
cdef object _record_cls = None
cdef object _log_append_time = None
cdef Py_ssize_t _off[8]
cdef object _none_seq = -1


cdef Py_ssize_t _offset(object cls, str attr) except -1:
    desc = cls.__dict__[attr]
    if type(desc).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__name__}.{attr} is not a slot")
    cdef PyMemberDef* m = (<PyMemberDescrObject*>desc).d_member
    if m.type != _T_OBJECT_EX:
        raise TypeError(f"{cls.__name__}.{attr} is not an object slot")
    return m.offset


def install(python_reader, record_cls, log_append_time):
    """Binds the Python reader (the fallback) and the Record class whose slots are filled."""
    global _python_reader, _record_cls, _log_append_time
    names = ("offset", "timestamp", "key", "value", "headers", "sequence", "control_type",
             "own_timestamp")
    for i, name in enumerate(names):
        _off[i] = _offset(record_cls, name)
    _python_reader = python_reader
    _record_cls = record_cls
    _log_append_time = log_append_time


cdef inline void _put(object o, Py_ssize_t off, object v):
    Py_INCREF(v)
    (<PyObject**>((<char*><PyObject*>o) + off))[0] = <PyObject*>v


cdef inline bint _varint(const unsigned char* d, Py_ssize_t n, Py_ssize_t* pos, int max_bytes,
                         int64_t* out):
    """Zigzag varint of at most max_bytes bytes (max_bytes <= 9, so it fits 63 bits);
    False where the Python reader must decide (bytes end, too long)."""
    cdef uint64_t raw = 0
    cdef int shift = 0
    cdef Py_ssize_t p = pos[0]
    cdef Py_ssize_t start = p
    cdef unsigned char b
    while True:
        if p - start >= max_bytes or p >= n:
            return False
        b = d[p]
        p += 1
        raw |= <uint64_t>(b & 0x7F) << shift
        if b < 0x80:
            pos[0] = p
            out[0] = <int64_t>(raw >> 1) ^ -<int64_t>(raw & 1)
            return True
        shift += 7


def read_v2_records(object buf, Py_ssize_t p, Py_ssize_t stop, Py_ssize_t count, list out,
                    object batch):
    """As records.decode._read_v2_records (same arguments, result and errors)."""
    cdef Py_ssize_t start_p = p
    cdef Py_ssize_t first = len(out)
    if (type(buf) is not bytes or batch.is_control or stop > PyBytes_GET_SIZE(buf)
            or p < 0 or count < 0):
        return _python_reader(buf, p, stop, count, out, batch)
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef int64_t base_offset = batch.base_offset
    cdef int64_t base_ts = batch.base_timestamp
    cdef int64_t base_seq = batch.base_sequence
    cdef bint append_time = batch.timestamp_type == _log_append_time
    cdef int64_t append_ts = batch.max_timestamp if append_time else 0
    cdef Py_ssize_t i, rec_end, h
    cdef int64_t length, ts_delta, offset_delta, n, klen, vlen, hcount, timestamp, sequence
    cdef object key, value, headers, rec, hkey, hvalue, own
    if not (-_SAFE < base_offset < _SAFE and -_SAFE < base_ts < _SAFE):
        return _python_reader(buf, p, stop, count, out, batch)
    for i in range(count):
        if not _varint(d, stop, &p, 5, &length):
            break
        rec_end = p + length
        if length < 0 or rec_end > stop:
            break
        p += 1  # attributes
        if not _varint(d, rec_end, &p, 9, &ts_delta):
            break
        if not _varint(d, rec_end, &p, 5, &offset_delta):
            break
        if not _varint(d, rec_end, &p, 5, &n):
            break
        if n < 0:
            if n != -1:
                break
            key = None
        else:
            if n > rec_end - p:
                break
            key = PyBytes_FromStringAndSize(<const char*>d + p, n)
            p += n
        if not _varint(d, rec_end, &p, 5, &n):
            break
        if n < 0:
            if n != -1:
                break
            value = None
        else:
            if n > rec_end - p:
                break
            value = PyBytes_FromStringAndSize(<const char*>d + p, n)
            p += n
        if not _varint(d, rec_end, &p, 5, &hcount):
            break
        if hcount < 0 or hcount > rec_end - p:
            break
        headers = []
        for h in range(hcount):
            if not _varint(d, rec_end, &p, 5, &klen):
                break
            if klen < 0 or klen > rec_end - p:
                break
            hkey = PyUnicode_DecodeUTF8(<const char*>d + p, klen, "surrogateescape")
            p += klen
            if not _varint(d, rec_end, &p, 5, &vlen):
                break
            if vlen < -1 or vlen > rec_end - p:
                break
            if vlen == -1:
                hvalue = None
            else:
                hvalue = PyBytes_FromStringAndSize(<const char*>d + p, vlen)
                p += vlen
            headers.append((hkey, hvalue))
        else:
            h = hcount
        if h != hcount or len(headers) != hcount:
            break
        if p != rec_end:
            break
        if not (-_SAFE < ts_delta < _SAFE):
            break
        timestamp = base_ts + ts_delta
        own = None
        if append_time:
            if timestamp != append_ts:
                own = timestamp
            timestamp = append_ts
        if base_seq == -1:
            sequence = -1
        else:
            sequence = base_seq + offset_delta
            if sequence > _INT32_MAX:
                sequence -= _INT32_MAX + 1
        rec = PyType_GenericAlloc(<PyTypeObject*>_record_cls, 0)
        _put(rec, _off[0], base_offset + offset_delta)
        _put(rec, _off[1], timestamp)
        _put(rec, _off[2], key)
        _put(rec, _off[3], value)
        _put(rec, _off[4], headers)
        _put(rec, _off[5], sequence)
        _put(rec, _off[6], None)
        _put(rec, _off[7], own)
        out.append(rec)
    else:
        return p
    # Something the fast path does not decide: the reference reads the whole call again.
    del out[first:]
    return _python_reader(buf, start_p, stop, count, out, batch)
