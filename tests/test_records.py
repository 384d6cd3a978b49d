"""The records of spamnb.estimator.verdict (written out as tuple subclasses of
``verdict.TupleRecord``, not made by ``collections.namedtuple``) behave as the
named tuples they replaced: fields, defaults, ``_replace``, ``_asdict``,
``_make``, repr, equality with plain tuples, pickling."""

import pickle

import pytest

from spamnb.estimator.verdict import Cutoffs, EvidenceSums, MessageScore, Score, TupleRecord, Verdict
from spamnb.model.spam_filter import Replayed


@pytest.mark.parametrize("cls, values", [
    (Cutoffs, (0.9, 0.1)), (EvidenceSums, (3.0, -2.0, None)), (Score, (0.5, 0.0)),
    (MessageScore, (1.5, (), 10, 7, EvidenceSums(1.0, -1.0, 0.5))), (Replayed, ("v", "c", "a")),
    (Verdict, ("spam", 0.99, 4.6, (("x", 1.0),), 12, 9, "", 2.0)),
])
def test_a_record_is_the_named_tuple_it_replaced(cls, values):
    record = cls(*values)
    assert issubclass(cls, TupleRecord) and isinstance(record, tuple)
    assert record == values and hash(record) == hash(values) and tuple(record) == values
    assert [getattr(record, name) for name in cls._fields] == list(values)
    assert record._asdict() == dict(zip(cls._fields, values))
    assert cls._make(values) == record and type(cls._make(values)) is cls
    first = cls._fields[0]
    changed = record._replace(**{first: "other"})
    assert type(changed) is cls and changed[0] == "other" and changed[1:] == record[1:]
    assert repr(record) == f"{cls.__name__}(" + ", ".join(f"{n}={v!r}" for n, v in zip(cls._fields, values)) + ")"
    assert pickle.loads(pickle.dumps(record)) == record and type(pickle.loads(pickle.dumps(record))) is cls
    assert cls(**dict(zip(cls._fields, values))) == record
    with pytest.raises(ValueError):
        record._replace(no_such_field=1)
    with pytest.raises(TypeError):
        cls._make(values[:-1])
    with pytest.raises(AttributeError):
        record.no_such_field = 1   # __slots__ = (): no instance dict
    with pytest.raises(AttributeError):
        setattr(record, first, 1)


def test_a_verdict_has_the_named_tuple_s_defaults():
    verdict = Verdict("ham", 0.01, -4.6)
    assert verdict == ("ham", 0.01, -4.6, (), 0, 0, "", None)
    assert Verdict._field_defaults == {"evidence": (), "tokens": 0, "known_tokens": 0, "reason": "", "part_max": None}
    with pytest.raises(TypeError):
        Verdict("ham", 0.01)
