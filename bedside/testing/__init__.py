"""bedside's test doubles, in one place: the scripted stand-in model (:mod:`bedside.testing.scripted`,
registered as ``bedside/scripted``; each benchmark's scripts are in its package, their shared helpers in
:mod:`bedside.testing.scripts`) and
the loopback OpenAI-compatible server (:mod:`bedside.testing.loopback`, also ``python -m
bedside.testing.loopback``). They dispatch on the call's protocol tag and read the call's render context
from it (in-process: message metadata; over HTTP, on the loopback test channel only: the
``X-Bedside-Protocol`` header and the ``bedside_tag`` body field), never the prompt text."""
