"""`infersight serve --gateway`: the default local stack (engine + gateway in front)."""

from __future__ import annotations

import signal
import urllib.error
import urllib.request

import openai
import pytest
from test_engine_serve_cli import _start

pytestmark = pytest.mark.engine


def test_serve_gateway_stack_answers_through_the_gateway_and_stops_on_sigint() -> None:
    s = _start("--gateway", "--port", "0", "--parallel", "2", "--ctx", "1024")
    try:
        engine_line = next(ln for ln in s.banner if ln.strip().startswith("engine"))
        engine_url = engine_line.split()[1]
        # The public URL is the gateway's, not the engine's; the engine refuses anyone
        # without the internal key the gateway holds (made per start, never printed).
        assert engine_url != s.url
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(engine_url + "/v1/models", timeout=10)
        assert refused.value.code == 401
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
        out = client.chat.completions.with_raw_response.create(
            model="SmolLM2-135M-Instruct",
            messages=[{"role": "user", "content": "Say hi"}],
            max_tokens=4,
        )
        # Only the gateway adds these headers: proof the answer went through it.
        assert out.headers.get("x-queue-delay") is not None
        assert out.headers.get("x-request-id")
        body = out.parse()
        assert body.usage is not None and body.usage.completion_tokens >= 1
        metrics = urllib.request.urlopen(s.url + "/metrics", timeout=10).read().decode()
        assert "infersight_gateway" in metrics
    finally:
        s.proc.send_signal(signal.SIGINT)
        rc = s.proc.wait(timeout=30)
    assert rc == 0
    err = s.proc.stderr.read() if s.proc.stderr else ""
    assert "Traceback" not in err
