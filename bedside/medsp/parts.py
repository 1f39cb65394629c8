"""MedSP1000's parts: what an eval's model calls need (:class:`bedside.parts.Parts`)."""

from __future__ import annotations

from bedside.medsp import protocols, scripted, scripted_environment, simulator
from bedside.parts import Parts

PARTS = Parts(protocols=protocols.PROTOCOLS, scripts=(scripted, scripted_environment), simulator=simulator)
