"""The shell every HTML page of codex-harness shares: one self-contained file, inline CSS and SVG.

No network: no external stylesheet, font, script or image. The little JavaScript there is only reports:
errors (``window.onerror``, ``console.error``) go into ``#js-errors`` (shown) and ``data-js-errors``;
after load the body carries ``data-load-ms`` (navigation start to the load event, layout done) and
``data-height``; opened as ``…#selftest`` also ``data-drawn-arrows`` (sequence-diagram arrows with a
non-empty box, which lays out every section). The page reads fine without it. On a run's page, sessions off screen
are not rendered until scrolled to (``section.lazy``, ``content-visibility: auto``): 50 sessions open at once.

Every page carries a Content-Security-Policy (:data:`CSP`): its two scripts and its style sheet run by the
sha256 of their text, nothing else does (no ``'unsafe-inline'``, no style attribute, nothing loaded), and a
blocked one is reported like an error (``csp: ...`` in ``#js-errors``). Text goes through :func:`e`.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

from contracts.text import clip
from contracts.text import escape as text_escape

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 24px 40px;color:#0f172a}
h1{font-size:22px;margin:18px 0 6px}h2{font-size:17px;margin:28px 0 4px}h3{font-size:14px;margin:14px 0 4px}
a{color:#1d4ed8;text-decoration:none}a:hover{text-decoration:underline}
.meta{color:#475569;margin:2px 0 8px}
table.sum{border-collapse:collapse;margin:10px 0}
table.sum th,table.sum td{border:1px solid #e2e8f0;padding:3px 9px;text-align:left;white-space:nowrap}
table.sum th{background:#f8fafc;font-weight:600}
td.pass,span.pass{color:#166534;background:#f0fdf4}td.fail,span.fail{color:#991b1b;background:#fee2e2;font-weight:600}
td.skip,span.skip{color:#64748b;background:#f8fafc}td.warn,span.warn{color:#92400e;background:#fef3c7}
span.badge{padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600;margin-left:8px}
.verdict{font-size:16px;font-weight:700;padding:4px 10px;border-radius:4px;display:inline-block}
.verdict.pass{background:#dcfce7;color:#166534}.verdict.fail{background:#fee2e2;color:#991b1b}
.verdict.none{background:#fef3c7;color:#92400e}
ul.checks{margin:4px 0 8px;padding-left:20px}ul.checks li{margin:2px 0}
.detail{color:#334155;font-size:13px}.ref{color:#64748b;font-size:12px}
span.level{font-size:11px;padding:0 5px;border-radius:3px;border:1px solid #cbd5e1;color:#475569}
span.level.should{border-color:#f59e0b;color:#92400e}
.scroll{overflow-x:auto;border:1px solid #e2e8f0;border-radius:4px;background:#fff}
.legend{color:#475569;font-size:12px;margin:4px 0}
.legend b{font-weight:600}
#js-errors{background:#fee2e2;color:#991b1b;padding:6px;white-space:pre-wrap;font-family:monospace}
table.matrix{table-layout:fixed;width:100%;max-width:1400px}
table.matrix th,table.matrix td{white-space:normal;overflow-wrap:anywhere;vertical-align:top}
table.matrix td code{overflow-wrap:anywhere}
details{margin:2px 0}details summary{cursor:pointer}li.breaking{color:#991b1b;font-weight:600}
section.lazy{content-visibility:auto;contain-intrinsic-size:auto 900px}
pre{background:#f8fafc;border:1px solid #e2e8f0;padding:8px;overflow-x:auto;font-size:12px}
svg text{font:11px system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.life{stroke:#cbd5e1;stroke-width:1.5;stroke-dasharray:4 4}
.lanehead{fill:#f1f5f9;stroke:#94a3b8}.lanename{font-weight:700!important;font-size:12px!important;text-anchor:middle}
.arrow line{stroke-width:1.6}.arrow text{text-anchor:middle;fill:#0f172a}
.arrow.c2s line{stroke:#2563eb;marker-end:url(#ah-blue)}.arrow.s2c line{stroke:#059669;marker-end:url(#ah-green)}
.arrow.c2m line,.arrow.m2c line{stroke:#7c3aed;marker-end:url(#ah-violet)}
.arrow.run line{stroke-width:4;stroke-opacity:.75}.count{font-weight:700!important;fill:#0f172a;text-anchor:middle}
.arrow.bad line,.arrow.error line{stroke:#dc2626;stroke-dasharray:5 3;marker-end:url(#ah-red)}
.arrow.bad text,.arrow.error text{fill:#b91c1c;font-weight:600}
.arrow.approval text,.arrow.decision text{fill:#b45309;font-weight:700}
.arrow.approval line,.arrow.decision line{stroke:#d97706;marker-end:url(#ah-amber)}
.arrow.interrupt text{fill:#6d28d9;font-weight:700}.arrow.turn text{font-weight:700}
.arrow.orphan text{fill:#b91c1c}
.time{font-size:10px!important;fill:#64748b;text-anchor:end}.line{font-size:10px!important;fill:#94a3b8;text-anchor:end}
.result rect{fill:#e0f2fe;stroke:#0284c7}.result text{fill:#075985;font-weight:700}
.result.bad rect{fill:#fee2e2;stroke:#dc2626}.result.bad text{fill:#991b1b}
.note text{font-style:italic;fill:#475569;text-anchor:middle}.note circle{fill:#475569}
.fault rect{fill:#fef3c7;stroke:#d97706;stroke-width:1.5}.fault text{font-weight:700;fill:#92400e;text-anchor:middle}
.fold rect{fill:#f1f5f9;stroke:#64748b;stroke-dasharray:4 3}.fold text{fill:#334155;text-anchor:middle}
.failband{fill:#fee2e2}.mark{fill:#b91c1c;font-weight:700}
.pair{fill:none;stroke:#94a3b8;stroke-width:1.5}.pair.server{stroke:#d97706}
.pair.open{stroke:#dc2626;stroke-dasharray:4 3;stroke-width:2}
.interval path{fill:none;stroke:#7c3aed;stroke-width:2}.interval text{fill:#6d28d9;font-weight:700}
.interval.open path{stroke:#dc2626;stroke-dasharray:4 3}.interval.open text{fill:#b91c1c}
.openend{fill:#b91c1c;font-weight:700}
.hist{background:#fff;border:1px solid #e2e8f0;margin:4px 8px 4px 0}.hist .bar{fill:#93c5fd}
.hist .axis,.hist .tick{stroke:#475569}.hist .tlabel{fill:#475569;text-anchor:middle;font-size:10px}
.hist .htitle{font-weight:700}.hist .hlegend{fill:#334155}.hist .pmark line{stroke-width:2}
.hist .pmark text{font-weight:700}.hist .empty{text-anchor:middle;fill:#64748b}
svg.defs{position:absolute}
"""

#: Arrow heads, defined once per page (inline SVGs of one document share ids).
DEFS = (
    '<svg class="defs" width="0" height="0" aria-hidden="true"><defs>'
    + "".join(
        f'<marker id="ah-{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" '
        f'markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
        for name, colour in (
            ("blue", "#2563eb"),
            ("green", "#059669"),
            ("violet", "#7c3aed"),
            ("red", "#dc2626"),
            ("amber", "#d97706"),
        )
    )
    + "</defs></svg>"
)

ERROR_HOOK = """
window.__errors=[];
function __report(m){window.__errors.push(String(m));var d=document.getElementById('js-errors');
if(d){d.textContent=window.__errors.join('\\n');d.hidden=false;}
if(document.body){document.body.setAttribute('data-js-errors',String(window.__errors.length));}}
window.addEventListener('error',function(e){__report('error: '+e.message);});
window.addEventListener('unhandledrejection',function(e){__report('unhandled rejection: '+e.reason);});
document.addEventListener('securitypolicyviolation',function(e){
__report('csp: '+e.violatedDirective+' blocked '+(e.blockedURI||'an inline one'));});
(function(){var orig=console.error;console.error=function(){
__report('console.error: '+Array.prototype.join.call(arguments,' '));return orig.apply(console,arguments);};})();
"""

AFTER_LOAD = """
(function(){
var b=document.body;b.setAttribute('data-js-errors',String(window.__errors.length));
if(window.__errors.length){__report(window.__errors.pop());}
window.addEventListener('load',function(){
void b.offsetHeight;
b.setAttribute('data-load-ms',performance.now().toFixed(1));
if(location.hash==='#selftest'){
var total=0;document.querySelectorAll('svg.seq').forEach(function(s){var n=0;
s.querySelectorAll('g.arrow').forEach(function(g){var r=g.getBBox();if(r.width>0){n++;}});
s.setAttribute('data-drawn',String(n));total+=n;});
b.setAttribute('data-drawn-arrows',String(total));}
b.setAttribute('data-height',String(document.documentElement.scrollHeight));
b.setAttribute('data-width',String(document.documentElement.scrollWidth));
var t=document.querySelector('table.sum');if(t){b.setAttribute('data-table-width',String(t.scrollWidth));}
b.setAttribute('data-ready','1');});
})();
"""

_LEGEND_ITEMS = (
    ("#2563eb", "→ client to server"),
    ("#059669", "← server to client"),
    ("#7c3aed", "model traffic"),
    ("#b45309", "approvals and decisions"),
    ("#075985", "the client's Results"),
    ("", "thick arrow ×N: a stream of one notification kind"),
    ("", "left brackets: request ↔ answer"),
    ("#dc2626", "dashed red bracket: never answered"),
    ("#6d28d9", "violet: interrupt → turn/completed"),
    ("#92400e", "⚡ fault where it struck"),
    ("#b91c1c", "red rows: a failed check points here"),
    ("", "⋯ folded rows"),
    ("", "grey numbers: wire.jsonl lines; hover an arrow for its frame"),
)
LEGEND = (
    '<p class="legend">'
    + " · ".join(f'<b class="c{c[1:]}">{t}</b>' if c else t for c, t in _LEGEND_ITEMS)
    + "</p>"
)
# Colours by class, not by a style attribute: the policy below allows no inline style but the sheet.
CSS += "".join(sorted({f".legend b.c{c[1:]}{{color:{c}}}" for c, _ in _LEGEND_ITEMS if c})) + "\n"


def sha256(text: str) -> str:
    """The CSP source that allows an inline script or style of exactly ``text``."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


#: The page's Content-Security-Policy: nothing is loaded (no network, no file), and the only script and style
#: that run are the page's own, by the hashes of their text. Whatever a hostile string smuggles past the
#: escaping (a ``<script>``, an ``onload=``, a ``style=``) is not run.
CSP = (
    f"default-src 'none'; script-src {sha256(ERROR_HOOK)} {sha256(AFTER_LOAD)}; style-src {sha256(CSS)}; "
    "base-uri 'none'; form-action 'none'"
)


def e(text: object) -> str:
    """Text for HTML: markup escaped, and controls and bidi characters written out (contracts.text), so a
    hostile string cannot reorder what the page shows."""
    return escape(text_escape(str(text), keep_newlines=True), quote=True)


#: The page title (a tab, a window list, a bookmark) is cut here.
TITLE_WIDTH = 200


def page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(clip(title, TITLE_WIDTH))}</title>"
        f"<script>{ERROR_HOOK}</script><style>{CSS}</style></head><body>"
        f'{DEFS}<div id="js-errors" hidden></div>{body}<script>{AFTER_LOAD}</script></body></html>'
    )
