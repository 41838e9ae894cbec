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
