"""The S3-compatible gateway of ``limno serve --s3-port``: bucket = pool, key = ``<ref>/<path>``.

The protocol modules here (:mod:`.s3errors`, :mod:`.s3xml`, :mod:`.sigv4`, :mod:`.sigv2`,
:mod:`.s3parse`, :mod:`.authenticate`, :mod:`.chunked`, :mod:`.checksums`,
:mod:`.operations`, :mod:`.headers`)
are pure and lake-independent, so they are tested against boto's own signers without a
server; the ASGI app and its handlers sit on top of them.
"""
