"""bedside's test doubles, in one place: the scripted stand-in model (:mod:`bedside.testing.scripted`,
registered as ``bedside/scripted``; each benchmark's scripts are in its package, their shared helpers in
:mod:`bedside.testing.scripts`) and
the loopback OpenAI-compatible server (:mod:`bedside.testing.loopback`, also ``python -m
bedside.testing.loopback``). They dispatch on the call's protocol tag and read what the call is about
from the sample it runs in (its *situation*, :mod:`bedside.testing.scripts`), never the prompt text: in
process directly; for the loopback server, the Inspect hook of :mod:`bedside.testing.channel` sends the
protocol and the situation with each request to the test channel only."""
