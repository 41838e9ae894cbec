# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled twins of kwire.records.decode's loops: over a v2 batch's records, over a run of
uncompressed legacy messages (magic 0 and 1, one Batch each), and over the inner messages of a
compressed legacy wrapper.

Each reads the common case (well-formed records, varints of the sizes Kafka writes, headers,
matching CRCs) in C and builds the same Record and Batch objects, slot by slot.  Anything else
-- a fault of any kind, a control batch, a varint of unusual length, a CRC mismatch, arithmetic
that would leave 64 bits -- takes back what it appended and hands the work to the Python
reader, so errors (text, byte offset, field) and results are the reference's by construction.
`make setup` builds it (scripts/build_native.py); without it kwire.records.decode uses the Python
readers alone.
"""

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

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
DEF _SAFE_OFFSET = 2305843009213693952  # 2**61: offset + (wrapper - last offset) stays in int64


API = 2  # kwire.records.decode checks it: a build of an older interface is not used

cdef object _python_reader = None
cdef object _record_cls = None
cdef object _log_append_time = None
cdef object _create_time = None
cdef object _no_codec = None  # the compression name of an uncompressed entry
cdef object _batch_cls = None
cdef object _crc32 = None
cdef Py_ssize_t _off[8]
cdef object _none_seq = -1

# A new Batch starts as Batch(base_offset, magic) would: every slot at its default (a new list
# for a default_factory=list field), then the decoded fields replace theirs.
DEF _MAX_BATCH_FIELDS = 64
cdef Py_ssize_t _n_batch = 0
cdef Py_ssize_t _boff[_MAX_BATCH_FIELDS]
cdef bint _blist[_MAX_BATCH_FIELDS]
cdef list _bdefault = []
# Offsets of the Batch fields the legacy reader sets.
cdef Py_ssize_t _B_BASE_OFFSET, _B_MAGIC, _B_COMPRESSION, _B_TIMESTAMP_TYPE, _B_MAX_TIMESTAMP
cdef Py_ssize_t _B_EXTRA, _B_RECORDS, _B_CRC, _B_CRC_COMPUTED, _B_POSITION, _B_SIZE


cdef Py_ssize_t _offset(object cls, str attr) except -1:
    desc = cls.__dict__[attr]
    if type(desc).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__name__}.{attr} is not a slot")
    cdef PyMemberDef* m = (<PyMemberDescrObject*>desc).d_member
    if m.type != _T_OBJECT_EX:
        raise TypeError(f"{cls.__name__}.{attr} is not an object slot")
    return m.offset


def install(python_reader, record_cls, batch_cls, log_append_time, create_time, no_codec,
            crc32):
    """Binds the Python v2 reader (the fallback), the Record and Batch classes whose slots are
    filled, the timestamp type names, the uncompressed codec's name and the CRC-32 function
    (zlib.crc32: the legacy formats' checksum)."""
    global _python_reader, _record_cls, _log_append_time, _create_time, _no_codec, _batch_cls
    global _crc32, _n_batch, _bdefault, _B_BASE_OFFSET, _B_MAGIC, _B_COMPRESSION
    global _B_TIMESTAMP_TYPE, _B_MAX_TIMESTAMP, _B_EXTRA, _B_RECORDS, _B_CRC, _B_CRC_COMPUTED
    global _B_POSITION, _B_SIZE
    import dataclasses

    names = ("offset", "timestamp", "key", "value", "headers", "sequence", "control_type",
             "own_timestamp")
    for i, name in enumerate(names):
        _off[i] = _offset(record_cls, name)
    fields = dataclasses.fields(batch_cls)
    if len(fields) > _MAX_BATCH_FIELDS:
        raise TypeError(f"{batch_cls.__name__} has more than {_MAX_BATCH_FIELDS} fields")
    defaults = []
    for i, f in enumerate(fields):
        _boff[i] = _offset(batch_cls, f.name)
        _blist[i] = f.default is dataclasses.MISSING
        if _blist[i] and f.default_factory is not list:
            # base_offset and magic (no default) are always set by the reader
            if f.name not in ("base_offset", "magic"):
                raise TypeError(f"{batch_cls.__name__}.{f.name}: no default the reader knows")
            _blist[i] = False
        defaults.append(None if f.default is dataclasses.MISSING else f.default)
    _n_batch = len(fields)
    _bdefault = defaults
    _B_BASE_OFFSET = _offset(batch_cls, "base_offset")
    _B_MAGIC = _offset(batch_cls, "magic")
    _B_COMPRESSION = _offset(batch_cls, "compression")
    _B_TIMESTAMP_TYPE = _offset(batch_cls, "timestamp_type")
    _B_MAX_TIMESTAMP = _offset(batch_cls, "max_timestamp")
    _B_EXTRA = _offset(batch_cls, "extra_attributes")
    _B_RECORDS = _offset(batch_cls, "records")
    _B_CRC = _offset(batch_cls, "crc")
    _B_CRC_COMPUTED = _offset(batch_cls, "crc_computed")
    _B_POSITION = _offset(batch_cls, "position")
    _B_SIZE = _offset(batch_cls, "size")
    _python_reader = python_reader
    _record_cls = record_cls
    _batch_cls = batch_cls
    _log_append_time = log_append_time
    _create_time = create_time
    _no_codec = no_codec
    _crc32 = crc32


cdef inline void _put(object o, Py_ssize_t off, object v):
    Py_INCREF(v)
    (<PyObject**>((<char*><PyObject*>o) + off))[0] = <PyObject*>v


cdef inline void _replace(object o, Py_ssize_t off, object v):
    """Stores v in a filled slot, releasing what was there."""
    cdef PyObject** slot = <PyObject**>((<char*><PyObject*>o) + off)
    cdef PyObject* was = slot[0]
    Py_INCREF(v)
    slot[0] = <PyObject*>v
    Py_XDECREF(was)


cdef inline uint64_t _u32(const unsigned char* p):
    return (<uint64_t>p[0] << 24) | (<uint64_t>p[1] << 16) | (<uint64_t>p[2] << 8) | p[3]


cdef inline int64_t _i32(const unsigned char* p):
    return <int32_t>(<uint32_t>_u32(p))


cdef inline int64_t _i64(const unsigned char* p):
    return <int64_t>((_u32(p) << 32) | _u32(p + 4))


cdef object _record(int64_t offset, object timestamp, object key, object value, object own):
    rec = PyType_GenericAlloc(<PyTypeObject*>_record_cls, 0)
    _put(rec, _off[0], offset)
    _put(rec, _off[1], timestamp)
    _put(rec, _off[2], key)
    _put(rec, _off[3], value)
    _put(rec, _off[4], [])
    _put(rec, _off[5], _none_seq)
    _put(rec, _off[6], None)
    _put(rec, _off[7], own)
    return rec


cdef tuple _legacy_fields(const unsigned char* d, Py_ssize_t at, Py_ssize_t end, int magic,
                          int64_t* timestamp):
    """(key, value) as kwire.records.decode._legacy_fields reads them from a well-formed message,
    its timestamp in timestamp; None where the Python reader must decide (any fault: it names
    it)."""
    cdef Py_ssize_t p = at + 18
    cdef int64_t n
    cdef int i
    cdef object key = None, value = None
    timestamp[0] = -1
    if magic == 1:
        if p + 8 > end:
            return None
        timestamp[0] = _i64(d + p)
        p += 8
    for i in range(2):
        if p + 4 > end:
            return None
        n = _i32(d + p)
        p += 4
        if n < -1 or n > end - p:
            return None
        if n == -1:
            field = None
        else:
            field = PyBytes_FromStringAndSize(<const char*>d + p, n)
            p += n
        if i == 0:
            key = field
        else:
            value = field
    if p != end:
        return None
    return (key, value)


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
    """As kwire.records.decode._read_v2_records (same arguments, result and errors)."""
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
            if sequence > _INT32_MAX or sequence < -_INT32_MAX - 1:
                # an offset delta Kafka never writes: Java's int arithmetic wraps it around
                sequence = ((sequence + 2147483648) & 0xFFFFFFFF) - 2147483648
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


def read_legacy(object buf, Py_ssize_t pos, Py_ssize_t n, list out):
    """Uncompressed legacy messages (magic 0 and 1) from pos on, one Batch each appended to
    out, as kwire.records.decode._decode_legacy makes them; stops at the first entry it does not
    decide (a compressed wrapper, a CRC mismatch, a fault, anything short) and returns where it
    stopped, for the Python reader to go on from there."""
    if type(buf) is not bytes or _batch_cls is None or pos < 0 or n > PyBytes_GET_SIZE(buf):
        return pos
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef int64_t size, offset, timestamp
    cdef Py_ssize_t end, i
    cdef int magic, attributes
    cdef object key = None, value = None
    view = memoryview(buf)
    while n - pos >= 26:
        size = _i32(d + pos + 8)
        magic = d[pos + 16]
        attributes = d[pos + 17]
        if magic > 1 or attributes & 0x07 or size < (22 if magic == 1 else 14):
            break
        if size > n - pos - 12:
            break
        end = pos + 12 + size
        stored = _u32(d + pos + 12)
        computed = _crc32(view[pos + 16:end])
        if computed != stored:
            break
        fields = _legacy_fields(d, pos, end, magic, &timestamp)
        if fields is None:
            break
        key, value = fields
        offset = _i64(d + pos)
        batch = PyType_GenericAlloc(<PyTypeObject*>_batch_cls, 0)
        for i in range(_n_batch):
            _put(batch, _boff[i], [] if _blist[i] else _bdefault[i])
        ts = timestamp
        _replace(batch, _B_BASE_OFFSET, offset)
        _replace(batch, _B_MAGIC, magic)
        _replace(batch, _B_COMPRESSION, _no_codec)
        _replace(batch, _B_TIMESTAMP_TYPE,
                 _log_append_time if magic == 1 and attributes & 0x08 else _create_time)
        _replace(batch, _B_EXTRA, attributes & ~(0x0F if magic == 1 else 0x07) & 0xFF)
        _replace(batch, _B_CRC, stored)
        _replace(batch, _B_CRC_COMPUTED, computed)
        _replace(batch, _B_POSITION, pos)
        _replace(batch, _B_SIZE, 12 + size)
        _replace(batch, _B_MAX_TIMESTAMP, ts)
        _replace(batch, _B_RECORDS, [_record(offset, ts, key, value, None)])
        out.append(batch)
        pos = end
    return pos


def read_inner(object inner, object batch):
    """As kwire.records.decode._read_inner when every inner message is well formed with a matching
    CRC: appends the records to batch.records and returns True. Returns False, having changed
    nothing, for anything else (the Python reader then reads it and names the fault)."""
    if type(inner) is not bytes or _batch_cls is None:
        return False
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(inner)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(inner)
    cdef Py_ssize_t p = 0, iend
    cdef int64_t isize, ioffset, last = 0, shift = 0, ts, wrapper, append_ts = 0
    cdef int imagic
    cdef object key = None, value = None
    cdef list found = []
    cdef list magics = []
    view = memoryview(inner)
    while p < n:
        if n - p < 18:
            return False
        ioffset = _i64(d + p)
        isize = _i32(d + p + 8)
        imagic = d[p + 16]
        if imagic > 1 or isize < (22 if imagic == 1 else 14) or isize > n - p - 12:
            return False
        iend = p + 12 + isize
        if _crc32(view[p + 16:iend]) != _u32(d + p + 12):
            return False
        if d[p + 17] & 0x07:
            return False
        if not -_SAFE_OFFSET < ioffset < _SAFE_OFFSET:
            return False  # the shift below stays in 64 bits
        fields = _legacy_fields(d, p, iend, imagic, &ts)
        if fields is None:
            return False
        key, value = fields
        found.append((ioffset, ts, key, value))
        magics.append(imagic)
        last = ioffset
        p = iend
    if not found:
        return False
    if not -_SAFE_OFFSET < batch.base_offset < _SAFE_OFFSET:
        return False
    wrapper = batch.base_offset
    if batch.magic == 1 and wrapper != 0:
        if wrapper < last:
            return False
        shift = wrapper - last
    cdef bint append_time = batch.timestamp_type == _log_append_time
    if append_time:
        append_ts = batch.max_timestamp
    records = batch.records
    for (ioffset, ts, key, value), imagic in zip(found, magics):
        own = None
        if append_time and imagic == 1:
            if ts != append_ts:
                own = ts
            ts = append_ts
        records.append(_record(ioffset + shift, ts, key, value, own))
    return True
