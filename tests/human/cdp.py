"""A headless Chromium driven over the DevTools protocol (CDP) with aiohttp's websocket client: no
browser-automation package is installed, and this is all the tests need (open a page, read it, type,
press keys, take a screenshot)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = Path("/usr/bin/chromium")


class Browser:
    def __init__(self, profile: Path, width: int = 1280, height: int = 900) -> None:
        self.profile = profile
        self.size = (width, height)
        self.proc: subprocess.Popen[str] | None = None
        self.session: aiohttp.ClientSession | None = None
        self.ws: Any = None
        self.page: str | None = None
        self.next_id = 0

    async def __aenter__(self) -> Browser:
        self.profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                str(CHROMIUM),
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                f"--window-size={self.size[0]},{self.size[1]}",
                "about:blank",
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stderr is not None
        url = None
        for _ in range(200):
            line = await asyncio.to_thread(self.proc.stderr.readline)
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url, "Chromium did not print its DevTools address"
        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(url, max_msg_size=0)
        target = await self.send("Target.createTarget", url="about:blank")
        attached = await self.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        self.page = attached["sessionId"]
        await self.send("Page.enable", session=True)
        await self.send("Runtime.enable", session=True)
        await self.viewport(*self.size)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.session is not None:
            await self.session.close()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        shutil.rmtree(self.profile, ignore_errors=True)

    async def send(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.page
        await self.ws.send_str(json.dumps(message))
        while True:
            reply = json.loads((await self.ws.receive()).data)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", session=True, url=url)
        await self.wait_for("document.readyState === 'complete'")

    async def eval(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 60.0) -> Any:
        for _ in range(int(timeout / 0.05)):
            value = await self.eval(expression)
            if value:
                return value
            await asyncio.sleep(0.05)
        raise TimeoutError(f"the page never satisfied {expression}")

    async def type(self, text: str) -> None:
        """Types into the focused element as a keyboard would (input events fire)."""
        await self.send("Input.insertText", session=True, text=text)

    async def key(self, key: str, code: str, keycode: int, modifiers: int = 0) -> None:
        for kind in ("rawKeyDown", "keyUp"):
            await self.send(
                "Input.dispatchKeyEvent",
                session=True,
                type=kind,
                key=key,
                code=code,
                windowsVirtualKeyCode=keycode,
                modifiers=modifiers,
            )

    async def ctrl_enter(self) -> None:
        await self.key("Enter", "Enter", 13, modifiers=2)

    async def viewport(self, width: int, height: int = 900) -> None:
        """The page's size, as a screen of that size shows it (the page's own media queries follow)."""
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    async def click(self, selector: str) -> None:
        """Clicks the element as a person would (input and change events fire)."""
        await self.eval(f"document.querySelector({json.dumps(selector)}).click()")

    async def screenshot(self, path: Path, full: bool = False) -> None:
        """The viewport (``full``: the whole page, beyond the viewport), as a PNG."""
        shot = await self.send("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=full)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
