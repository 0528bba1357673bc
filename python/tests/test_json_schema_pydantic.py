"""Structured outputs end to end on what pydantic's model_json_schema() writes (bounds, formats, maps, tuples, nested
models with defaults, optionals, enums): the schema compiles as pydantic wrote it, random walks through the
recognizer never reach a dead end, and every document they end is one pydantic itself validates (an independent
validator of the same model)."""
import datetime
import enum
import ipaddress
import json
import uuid
from typing import Literal, Optional

import pytest

from attnzoo import _core
from test_json_schema import walks

pydantic = pytest.importorskip("pydantic")
from pydantic import BaseModel, Field, conint, constr  # noqa: E402


class Color(str, enum.Enum):
    red = "red"
    green = "green"


class Address(BaseModel):
    city: str = Field(max_length=12)
    zip: Optional[str] = None
    ip: ipaddress.IPv4Address


class Order(BaseModel):
    id: uuid.UUID
    placed: datetime.datetime
    due: datetime.date
    quantity: conint(ge=1, le=1000)
    price: float = Field(gt=0, le=99999.99)
    discount: int = Field(default=0, multiple_of=5, ge=0, le=50)
    color: Color = Color.red
    ship_to: Address
    bill_to: Optional[Address] = None
    counts: dict[str, int]
    pair: tuple[int, str]
    kind: Literal["retail", "wholesale"] = "retail"
    notes: list[constr(max_length=8)] = Field(default_factory=list, max_length=2)


class Booking(Order):
    """With a duration: pydantic's timedelta holds fewer than 10^9 days, where JSON Schema's duration has no bound
    (so walks, which may write "P999999999Y", stay on Order)."""
    window: datetime.timedelta


def test_the_schema_compiles_as_pydantic_writes_it():
    _core.check_json_schema(json.dumps(Booking.model_json_schema()))


def test_walks_end_in_documents_pydantic_validates():
    schema = json.dumps(Order.model_json_schema())
    for doc in walks(schema, 2026, 30, 10, limit=3000, alternate=True):
        order = Order.model_validate_json(doc)  # raises on anything the schema does not allow
        assert 1 <= order.quantity <= 1000 and order.discount % 5 == 0


def test_a_document_pydantic_writes_is_accepted_on_every_prefix():
    order = Booking(id=uuid.UUID(int=0x1234), placed=datetime.datetime(2024, 2, 29, 23, 59, 1, 250000,
                                                                     tzinfo=datetime.timezone.utc),
                  due=datetime.date(2025, 12, 31), window=datetime.timedelta(days=3, hours=4), quantity=7,
                  price=12.5, discount=15, ship_to=Address(city="Oslo", ip="10.0.0.255"), counts={"a": 1, "b": -2},
                  pair=(3, "x"), notes=["hi"])
    doc = order.model_dump_json().encode()
    text = json.dumps(Booking.model_json_schema())
    n, complete, can_end = _core.json_schema_prefix(text, doc)
    assert n == len(doc) and can_end, (n, doc[:n + 1])
    for k in range(len(doc)):
        assert _core.json_schema_prefix(text, doc[:k])[0] == k
