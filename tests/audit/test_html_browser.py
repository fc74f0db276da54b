"""``audit.html`` in a real browser: headless Chromium (Debian's ``chromium`` package) renders the
page of a passing and of a failing audit; the test reads the rendered DOM and the screenshot's
pixels (the verdict banner's colour).  Skipped, with the reason, where no Chromium is installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zlib

import numpy as np
import pytest

from .helpers import REFUTED, ROOT, audit_into

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium installed (apt-get install chromium)")

PASS_GREEN = (0xDA, 0xFB, 0xE1)  # the banner of a passing audit (html.py's CSS)
FAIL_RED = (0xFF, 0xEB, 0xE9)


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--host-resolver-rules=MAP * ~NOTFOUND", *args],
                          capture_output=True, timeout=120, env={**os.environ, "HOME": os.environ.get("HOME", "/tmp")})


def _png_rgb(path: str) -> np.ndarray:
    """Decode an 8-bit RGB(A), non-interlaced PNG (what Chromium writes) into an H×W×3 array."""
    with open(path, "rb") as fh:
        data = fh.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    depth, color, interlace = header[8], header[9], header[12]
    assert depth == 8 and color in (2, 6) and interlace == 0
    channels = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * channels)
    out = np.zeros((h, w * channels), np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        prev = out[y - 1] if y else np.zeros_like(line)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 0xFF
        else:  # 1 (sub), 3 (average), 4 (Paeth): left-dependent, pixel by pixel
            cur = np.zeros_like(line)
            for x in range(line.size):
                a = cur[x - channels] if x >= channels else 0
                b = prev[x]
                c = prev[x - channels] if x >= channels else 0
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (line[x] + pred) & 0xFF
        out[y] = cur
    return out.reshape(h, w, channels)[:, :, :3].astype(np.uint8)


def _count(img: np.ndarray, rgb: tuple[int, int, int]) -> int:
    return int(np.sum(np.all(img == np.array(rgb, np.uint8), axis=2)))


def _render(html: str, tmp: str) -> tuple[str, np.ndarray]:
    dom = _chromium("--dump-dom", f"file://{html}")
    assert dom.returncode == 0, dom.stderr[-500:]
    shot = os.path.join(tmp, "shot.png")
    r = _chromium(f"--screenshot={shot}", "--window-size=1000,700", "--hide-scrollbars", f"file://{html}")
    assert r.returncode == 0 and os.path.isfile(shot), r.stderr[-500:]
    return dom.stdout.decode("utf-8"), _png_rgb(shot)


def test_a_passing_audit_shows_its_verdict_first(tmp_path):
    out = str(tmp_path / "b")
    audit_into(os.path.join(ROOT, "examples", "affine.mir"), out)
    html = os.path.join(out, "audit.html")
    with open(html, encoding="utf-8") as fh:
        page = fh.read()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)  # no external asset
    dom, img = _render(html, str(tmp_path))
    headings = re.findall(r"<h2[^>]*>([^<]+)</h2>", dom)
    assert headings[:3] == ["Summary", "Findings", "Proofs"]
    assert {"Gradients", "Numerics", "Compiled code", "Traceability", "Tool identity",
            "Assumptions and limits"} <= set(headings)
    assert "Audit verdict: PASS" in dom and "No findings: every check holds." in dom
    assert _count(img, PASS_GREEN) > 2000 and _count(img, FAIL_RED) == 0


def test_a_failing_audit_shows_the_source_line_of_its_finding(tmp_path):
    program = tmp_path / "bad.mir"
    program.write_text(REFUTED, encoding="utf-8")
    out = str(tmp_path / "b")
    audit_into(str(program), out)
    dom, img = _render(os.path.join(out, "audit.html"), str(tmp_path))
    assert "Audit verdict: FAIL" in dom
    assert "2 |   %0 = matmul(%a, %b) : f32[N, 3]" in dom and "matmul.C4" in dom
    assert _count(img, FAIL_RED) > 2000 and _count(img, PASS_GREEN) == 0
