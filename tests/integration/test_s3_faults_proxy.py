"""The test's S3 fault proxy (tests/support/s3_faults.py) in front of a real SeaweedFS: everything else passes
through unchanged (signed requests, a multipart upload, ranges), a GET fault answers 5xx until the key is
written again, a PUT fault answers 5xx its number of times, a delayed PUT arrives late but whole."""

from __future__ import annotations

import secrets
import time
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.support.s3_faults import Fault, FaultProxy

pytestmark = pytest.mark.integration


def client(endpoint: str, s3: Any) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=s3.access_key,
                        aws_secret_access_key=s3.secret_key, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2, "mode": "standard"}))


def test_requests_pass_through_and_faults_take_only_what_they_match(s3_server: Any) -> None:
    key, other = f"proxy-{secrets.token_hex(4)}/a b.bin", f"proxy-{secrets.token_hex(4)}/other"
    body = secrets.token_bytes(6 * 2**20)
    with FaultProxy(s3_server.endpoint_url) as proxy:
        s3 = client(proxy.endpoint_url, s3_server)
        s3.put_object(Bucket=s3_server.bucket, Key=key, Body=body)
        assert s3.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == body
        assert s3.head_object(Bucket=s3_server.bucket, Key=key)["ContentLength"] == len(body)
        assert s3.get_object(Bucket=s3_server.bucket, Key=key, Range="bytes=0-9")["Body"].read() == body[:10]
        upload = s3.create_multipart_upload(Bucket=s3_server.bucket, Key=other)["UploadId"]
        part = s3.upload_part(Bucket=s3_server.bucket, Key=other, UploadId=upload, PartNumber=1, Body=body)
        s3.complete_multipart_upload(Bucket=s3_server.bucket, Key=other, UploadId=upload,
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        listed = s3.list_objects_v2(Bucket=s3_server.bucket, Prefix=key.split("/")[0] + "/")["Contents"]
        assert [o["Key"] for o in listed] == [key]

        broken = proxy.add(Fault("GET", lambda k: k == key, status=503, until_put=True))
        for _ in range(2):
            with pytest.raises(ClientError) as raised:
                s3.get_object(Bucket=s3_server.bucket, Key=key)
            assert raised.value.response["Error"]["Code"] == "ServiceUnavailable"
        assert s3.get_object(Bucket=s3_server.bucket, Key=other)["Body"].read() == body  # another key: served
        assert s3.head_object(Bucket=s3_server.bucket, Key=key)["ContentLength"] == len(body)  # HEAD: served
        s3.put_object(Bucket=s3_server.bucket, Key=key, Body=body[:100])
        assert s3.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == body[:100]  # written again: healed
        assert broken.taken == [key] * 6  # two calls, three attempts each (the first and 2 retries)

        proxy.add(Fault("PUT", lambda k: k == other, status=500, times=3))
        with pytest.raises(ClientError):
            s3.put_object(Bucket=s3_server.bucket, Key=other, Body=b"x")  # its three attempts answered 500
        s3.put_object(Bucket=s3_server.bucket, Key=other, Body=b"y")
        assert s3.get_object(Bucket=s3_server.bucket, Key=other)["Body"].read() == b"y"

        proxy.add(Fault("PUT", lambda k: k == other, delay=2.0, times=1))
        began = time.monotonic()
        s3.put_object(Bucket=s3_server.bucket, Key=other, Body=body)
        assert time.monotonic() - began >= 2.0
        direct = client(s3_server.endpoint_url, s3_server)
        assert direct.get_object(Bucket=s3_server.bucket, Key=other)["Body"].read() == body
        # the first call's last attempts, the second call and the delayed one
        assert [e.status for e in proxy.seen("PUT", lambda k: k == other)][-4:] == [500, 500, 200, 200]
