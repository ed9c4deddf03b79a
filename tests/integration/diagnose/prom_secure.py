"""A real Prometheus behind TLS (with client certificates) and basic auth, as its own
``--web.config.file`` offers them: a CA, server and client certificates made with
``openssl``, a bcrypt password hash, and the http_config file a client uses."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path

from infersight.core.listen import free_port
from realparts import real_part_path

PROMETHEUS = real_part_path("prometheus") or "/usr/bin/prometheus"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
USER, PASSWORD = "sre", "fleet-test-pw-7c1d"


def _ssl(*args: str) -> None:
    subprocess.run([OPENSSL, *args], check=True, capture_output=True, timeout=60)


def make_certs(d: Path) -> None:
    """ca.pem, server.pem/key (for 127.0.0.1) and client.pem/key, signed by the CA."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _ssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        str(d / "ca.key"),
        "-out",
        str(d / "ca.pem"),
        "-days",
        "2",
        "-subj",
        "/CN=infersight test CA",
    )
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for who in ("server", "client"):
        _ssl(
            "req",
            *ec,
            "-keyout",
            str(d / f"{who}.key"),
            "-out",
            str(d / f"{who}.csr"),
            "-subj",
            f"/CN={'127.0.0.1' if who == 'server' else 'sre'}",
        )
        _ssl(
            "x509",
            "-req",
            "-in",
            str(d / f"{who}.csr"),
            "-CA",
            str(d / "ca.pem"),
            "-CAkey",
            str(d / "ca.key"),
            "-CAcreateserial",
            "-out",
            str(d / f"{who}.pem"),
            "-days",
            "2",
            "-extfile",
            str(d / f"{who}.ext"),
        )


def bcrypt_hash(password: str) -> str:
    """A bcrypt hash (Prometheus' basic_auth_users format) from libxcrypt, via Python's
    crypt module where it still exists, else Perl's crypt()."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt

        h = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=2**5))
        if h and h.startswith("$2"):
            return h
    except ImportError:
        pass
    out = subprocess.run(
        ["perl", "-e", "print crypt($ARGV[0], q{$2b$05$infersightfleettestsal.})", password],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return out.stdout.strip()


def write_http_config(d: Path, *, cert: bool = True, password: str = PASSWORD) -> Path:
    """The client side, in Prometheus' http_config format (paths relative to the file)."""
    (d / "password").write_text(password + "\n")
    lines = [
        "basic_auth:",
        f"  username: {USER}",
        "  password_file: password",
        "tls_config:",
        "  ca_file: ca.pem",
    ]
    if cert:
        lines += ["  cert_file: client.pem", "  key_file: client.key"]
    path = d / ("http.yml" if cert and password == PASSWORD else f"http-{cert}-{len(password)}.yml")
    path.write_text("\n".join(lines) + "\n")
    return path


def start_prometheus(d: Path, scrape_configs: str) -> tuple[subprocess.Popen[bytes], str]:
    """Prometheus on a free port with TLS, required client certificates and basic auth."""
    make_certs(d)
    (d / "web.yml").write_text(
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n"
        f"basic_auth_users:\n  {USER}: '{bcrypt_hash(PASSWORD)}'\n"
    )
    (d / "prometheus.yml").write_text(
        f"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{scrape_configs}"
    )
    port = free_port()
    log = (d / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={d / 'prometheus.yml'}",
            f"--web.config.file={d / 'web.yml'}",
            f"--storage.tsdb.path={d / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=d,
    )
    return proc, f"https://127.0.0.1:{port}"
