"""A stand-in for a consumed confluent-kafka Message, with the methods
``limno.streams.kafka_records.decode_records`` asks of one: for unit tests of the
decoding (tests against a real broker consume real messages)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Msg"]


@dataclass
class Msg:
    raw: bytes | None
    at: int
    raw_key: bytes | None = b"k"
    topic_name: str = "t"

    def key(self) -> bytes | None:
        return self.raw_key

    def value(self) -> bytes | None:
        return self.raw

    def headers(self) -> None:
        return None

    def topic(self) -> str:
        return self.topic_name

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.at

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000 + self.at)
