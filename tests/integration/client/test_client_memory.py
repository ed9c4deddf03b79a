"""A client that sends many requests holds no memory for the ones that ended.

The resend rule remembers the last request each pooled connection carried; what it
remembers about the one before must go once a request is sent, or a keep-alive
connection would keep every request it ever carried (issue 31: ~0.8 KB per request).
"""

from __future__ import annotations

import gc

from infersight.client import Client
from infersight.core.records import RequestRecord
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

MSG = [{"role": "user", "content": "hi"}]


def _records_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is RequestRecord)


async def test_requests_over_one_keep_alive_connection_are_not_kept() -> None:
    async with (
        FakeOpenAI(FakeConfig(tokens=2)).running() as fake,
        Client(fake.base_url, max_connections=1) as c,
    ):
        await c.chat(MSG, stream=False)  # the connection and the pool exist
        before = _records_alive()
        for stream in (False, True) * 100:
            done = await c.chat(MSG, stream=stream)
            assert done.record.ok
        del done
        after = _records_alive()
    # One request per connection may stay remembered (the pool's last); none of the 200.
    assert after - before <= 2, f"{after - before} request records outlived their requests"
