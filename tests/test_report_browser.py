"""The report renders in headless Debian Chromium: no console errors or failed requests, every
figure present and non-empty, a 1,024-GPU report under 5 MB and rendered in under 3 s."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-gpu",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
FIGURES = (
    "#fig-topology",
    "#fig-busbw-1",
    "#fig-mapping",
    "#fig-breakdown",
    "#fig-sweep",
    "#fig-ettr",
)
MAX_BYTES = 5_000_000
MAX_RENDER_S = 3.0

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed (scripts/install-system-deps.sh adds it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) missing")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def open_report(browser, path: Path, screenshot: Path) -> float:
    """Load `path`, fail on console errors / failed requests, check figures; seconds to render."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.on(
        "request",
        lambda r: (
            None if r.url.startswith("file://") else problems.append(f"network request: {r.url}")
        ),
    )
    started = time.perf_counter()
    page.goto(path.as_uri(), wait_until="load")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))")  # first paint
    elapsed = time.perf_counter() - started
    for sel in FIGURES:
        box = page.locator(f"{sel} svg").bounding_box()
        assert box is not None and box["width"] > 500 and box["height"] > 200, sel
        drawn = page.locator(f"{sel} svg path, {sel} svg image, {sel} svg use").count()
        assert drawn > 10, (sel, drawn)
    page.screenshot(path=str(screenshot), full_page=True)
    page.close()
    assert not problems, problems
    return elapsed


def test_demo_report_renders(browser, tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    run_cli("demo", "--out", str(out))
    open_report(browser, out, tmp_path / "demo.png")
    assert (tmp_path / "demo.png").stat().st_size > 100_000


def test_1024_gpu_report_is_small_and_fast(browser, tmp_path: Path) -> None:
    out = tmp_path / "big.html"
    run_cli(
        "report",
        "--model",
        "llama3-70b",
        "--cluster",
        "dgx-h100",
        "--nodes",
        "128",
        "--gbs",
        "1024",
        "--seq",
        "8192",
        "--out",
        str(out),
    )
    assert out.stat().st_size < MAX_BYTES
    elapsed = open_report(browser, out, tmp_path / "big.png")
    assert elapsed < MAX_RENDER_S, elapsed
