"""DischargeBench's parts: what an eval's model calls need (:class:`bedside.parts.Parts`)."""

from __future__ import annotations

from bedside.discharge import protocols, scripted, scripted_judges, simulator
from bedside.discharge.mimic import protocol as mimic_protocol
from bedside.discharge.mimic import scripted as mimic_scripted
from bedside.parts import Parts

PARTS = Parts(
    protocols=(*protocols.PROTOCOLS, *mimic_protocol.PROTOCOLS),
    scripts=(scripted, scripted_judges, mimic_scripted),
    simulator=simulator,
)
