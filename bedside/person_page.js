// What bedside's pages for a person share (bedside/person_page.py): building elements, and whether the person is
// working on what the page shows (the page reports that to its server every BEAT_MS: the person's working time).
"use strict";

const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat(Infinity)) if (kid !== null && kid !== undefined && kid !== false) e.append(kid);
  return e;
};
const words = s => String(s).replace(/_/g, " ");

const IDLE_MS = 180000, BEAT_MS = 2000;  // no input for 3 minutes: not working; the page reports work every 2 s
let lastActivity = Date.now();
for (const kind of ["keydown", "input", "pointerdown", "pointermove", "touchstart", "wheel", "scroll", "focus"])
  window.addEventListener(kind, () => { lastActivity = Date.now(); }, {capture: true, passive: true});
// the page is visible and its person gave some input in the last 3 minutes
const working = () => document.visibilityState === "visible" && Date.now() - lastActivity < IDLE_MS;
