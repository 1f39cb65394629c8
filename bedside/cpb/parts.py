"""CPB-Bench's parts: what an eval's model calls need (:class:`bedside.parts.Parts`)."""

from __future__ import annotations

from bedside.cpb import protocols, scripted, simulator
from bedside.cpb.replay import ReplayEngine
from bedside.parts import Parts

PARTS = Parts(protocols=protocols.PROTOCOLS, scripts=(scripted,), engines={"replay": ReplayEngine}, simulator=simulator)
