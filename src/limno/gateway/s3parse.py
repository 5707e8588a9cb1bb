"""Parsers of the XML request bodies S3 clients send: DeleteObjects, CompleteMultipartUpload,
CreateBucket.

The bodies are untrusted: they are parsed with DTDs and entities refused (no billion laughs,
no external entities, via ``defusedxml``), any namespace or none is accepted (SDKs send the
S3 one, hand-written clients often none), and any malformed or out-of-schema body is S3's
``MalformedXML``. :mod:`limno.gateway.s3xml` re-exports everything here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.etree.ElementTree import Element

from limno.gateway.s3errors import S3Error

__all__ = [
    "MAX_DELETE_KEYS",
    "MAX_PART_NUMBER",
    "MAX_XML_BODY",
    "CompletedPart",
    "DeleteRequest",
    "ObjectToDelete",
    "parse_complete_multipart",
    "parse_create_bucket",
    "parse_delete",
    "unquote_etag",
]

#: the largest request body a parser is handed (10,000 parts with checksums fit): a handler
#: reading more answers ``MaxMessageLengthExceeded`` instead of buffering it
MAX_XML_BODY = 8 * 1024 * 1024
#: S3's limits on a DeleteObjects request and on part numbers
MAX_DELETE_KEYS = 1000
MAX_PART_NUMBER = 10000


@dataclass(frozen=True)
class ObjectToDelete:
    key: str
    version_id: str | None = None
    #: a conditional delete's ETag (``*``: the key must exist), unquoted
    etag: str | None = None
    #: a condition the gateway does not implement (``LastModifiedTime``, ``Size``)
    unsupported: str | None = None


@dataclass(frozen=True)
class DeleteRequest:
    objects: list[ObjectToDelete]
    quiet: bool = False


@dataclass(frozen=True)
class CompletedPart:
    part_number: int
    etag: str
    #: ``ChecksumCRC32`` etc. as sent for the part (base64), keyed by element name
    checksums: dict[str, str] = field(default_factory=dict)


def unquote_etag(etag: str) -> str:
    """The ETag without surrounding quotes (clients send either form)."""
    etag = etag.strip()
    if etag.startswith("W/"):
        etag = etag[2:]
    if len(etag) >= 2 and etag[0] == etag[-1] == '"':
        return etag[1:-1]
    return etag.replace("&quot;", "")


def _parse(body: bytes, root: str) -> Element:
    """The document's root element, named ``root`` (namespace or not); DTDs refused."""
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError, fromstring

    if len(body) > MAX_XML_BODY:
        raise S3Error("MaxMessageLengthExceeded")
    try:
        element: Element = fromstring(body, forbid_dtd=True)
    except (ParseError, DefusedXmlException, ValueError) as e:
        raise S3Error("MalformedXML") from e
    if _local(element) != root:
        raise S3Error("MalformedXML")
    return element


def _local(element: Element) -> str:
    return element.tag.rsplit("}", 1)[-1]


def _children(element: Element, name: str) -> list[Element]:
    return [c for c in element if _local(c) == name]


def _text(element: Element, name: str) -> str | None:
    found = _children(element, name)
    if not found:
        return None
    if len(found) > 1:
        raise S3Error("MalformedXML")
    return found[0].text or ""


def parse_delete(body: bytes) -> DeleteRequest:
    """The body of DeleteObjects: 1 to 1000 ``<Object>`` with a ``<Key>``, and ``<Quiet>``."""
    root = _parse(body, "Delete")
    quiet_text = _text(root, "Quiet")
    if quiet_text is not None and quiet_text.strip().lower() not in ("true", "false"):
        raise S3Error("MalformedXML")
    objects: list[ObjectToDelete] = []
    for obj in _children(root, "Object"):
        key = _text(obj, "Key")
        if key is None:
            raise S3Error("MalformedXML")
        version = _text(obj, "VersionId")
        etag = _text(obj, "ETag")
        other = next((n for n in ("LastModifiedTime", "Size") if _text(obj, n) is not None), None)
        objects.append(ObjectToDelete(key, version or None, etag.strip() if etag else None, other))
    if not objects or len(objects) > MAX_DELETE_KEYS:
        raise S3Error("MalformedXML")
    return DeleteRequest(objects, quiet=(quiet_text or "").strip().lower() == "true")


def parse_complete_multipart(body: bytes) -> list[CompletedPart]:
    """The body of CompleteMultipartUpload: the parts, strictly ascending by number."""
    root = _parse(body, "CompleteMultipartUpload")
    parts: list[CompletedPart] = []
    for part in _children(root, "Part"):
        number_text = _text(part, "PartNumber")
        etag = _text(part, "ETag")
        if number_text is None or etag is None:
            raise S3Error("MalformedXML")
        try:
            number = int(number_text.strip())
        except ValueError as e:
            raise S3Error("MalformedXML") from e
        if not 1 <= number <= MAX_PART_NUMBER:
            raise S3Error(
                "InvalidArgument",
                f"Part number must be an integer between 1 and {MAX_PART_NUMBER}, inclusive",
                ArgumentName="partNumber",
                ArgumentValue=str(number),
            )
        if parts and number <= parts[-1].part_number:
            raise S3Error("InvalidPartOrder")
        checksums = {
            _local(c): (c.text or "").strip() for c in part if _local(c).startswith("Checksum")
        }
        parts.append(CompletedPart(number, unquote_etag(etag), checksums))
    if not parts:
        raise S3Error("MalformedXML")
    return parts


def parse_create_bucket(body: bytes) -> str | None:
    """The LocationConstraint of a CreateBucket body (None for no body or no constraint)."""
    if not body.strip():
        return None
    root = _parse(body, "CreateBucketConfiguration")
    value = _text(root, "LocationConstraint")
    return value.strip() or None if value is not None else None
