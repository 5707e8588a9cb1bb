"""The loopback S3 server's credentials and buckets (the server itself: conftest.py)."""

from __future__ import annotations

import uuid

import boto3

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "limno-test",
    "AWS_SECRET_ACCESS_KEY": "limno-test-secret",
    "AWS_REGION": "us-east-1",
}


def make_bucket(endpoint: str) -> str:
    """A new, empty bucket on the loopback server."""
    name = f"limno-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=endpoint, **_boto_args())
    client.create_bucket(Bucket=name)
    return name


def _boto_args() -> dict[str, str]:
    return {
        "aws_access_key_id": S3_ENV["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": S3_ENV["AWS_SECRET_ACCESS_KEY"],
        "region_name": S3_ENV["AWS_REGION"],
    }
