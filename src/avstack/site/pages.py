"""Static, offline HTML pages: one stylesheet and one script inlined in every page (no CDN, no
fetch, so a page opens from file:// with no server), escaping, relative links, a local server.

The DOM hooks the pages carry are documented in the README ("Viewer") and kept stable: tests
and tools read times from `data-*` attributes, never from pixels or text.
"""

from __future__ import annotations

import functools
import html
import http.server
import os
import socketserver
from pathlib import Path

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fafafa}
h1{font-size:20px}h2{font-size:16px;margin-top:24px}a{color:#1a5fb4}
table{border-collapse:collapse;background:#fff}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
th{background:#f0f0f0;cursor:pointer}.num{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b00}.filters{margin:8px 0;display:flex;gap:12px;flex-wrap:wrap}.filters label{font-size:12px}
.timeline{position:relative;margin:8px 0 24px 0;width:100%;max-width:1200px}
.axis{position:relative;height:22px;border-top:2px solid #444;margin-top:4px}
.tick{position:absolute;top:0;font-size:11px;color:#555;transform:translateX(-50%)}
.lane{position:relative;height:28px;border-bottom:1px dashed #ddd}
.lane-label{font-size:12px;color:#555;margin-top:6px}
.frames{position:relative;height:74px}
.frame{position:absolute;top:0;height:60px;border:1px solid #999;background:#000}
.frame img{height:60px;display:block}.frame span{position:absolute;top:60px;left:0;font-size:10px}
.word{position:absolute;top:3px;height:20px;background:#4a90d9;color:#fff;font-size:11px;overflow:hidden;
 white-space:nowrap;border-radius:3px;box-sizing:border-box;padding:0 2px}
.stroke{position:absolute;top:3px;height:20px;background:rgba(46,160,67,.35);border:1px solid #2ea043;
 box-sizing:border-box;font-size:11px}
.pred{position:absolute;top:2px;width:0;height:24px}
.pred::before{content:"";position:absolute;left:-5px;top:6px;width:10px;height:10px;border-radius:50%;
 background:var(--c);border:1px solid #fff}
.cursor{position:absolute;top:0;bottom:0;width:2px;background:#e01b24;pointer-events:none}
.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:10px;height:10px;
 border-radius:50%;margin-right:4px;background:var(--c)}
.lastframe{position:relative;display:inline-block;max-width:100%}.lastframe svg{max-width:100%;height:auto}
pre{background:#fff;border:1px solid #ddd;padding:6px;white-space:pre-wrap;max-height:240px;overflow:auto}
.opt-correct{font-weight:bold;color:#2ea043}.item{background:#fff;border:1px solid #ddd;padding:8px;margin:8px 0}
.item img{max-height:220px}
"""

JS = """
function avFilter(){
  var f={};document.querySelectorAll('[data-filter]').forEach(function(s){f[s.dataset.filter]=s.value});
  var failed=document.getElementById('failed-only');
  document.querySelectorAll('tr[data-clip-row]').forEach(function(r){
    var ok=true;for(var k in f){if(k!=='stack'&&f[k]&&r.dataset[k]!==f[k])ok=false}
    if(failed&&failed.checked&&r.dataset.failed!=='1')ok=false;r.style.display=ok?'':'none'});
  var st=f.stack;document.querySelectorAll('[data-col-stack]').forEach(function(c){
    c.style.display=(!st||c.dataset.colStack===st)?'':'none'});
}
function avSort(key){
  var tb=document.querySelector('#clips tbody');if(!tb)return;
  var rows=Array.prototype.slice.call(tb.querySelectorAll('tr'));
  rows.sort(function(a,b){var x=parseFloat(b.dataset[key]||0),y=parseFloat(a.dataset[key]||0);
    return x-y||a.dataset.clipRow.localeCompare(b.dataset.clipRow)});
  rows.forEach(function(r){tb.appendChild(r)});
}
function avVideo(){
  var v=document.getElementById('video'),tl=document.querySelector('.timeline');if(!v||!tl)return;
  var ax=tl.querySelector('.axis'),c=tl.querySelector('.cursor');
  var a=parseFloat(ax.dataset.axisStartMs),b=parseFloat(ax.dataset.axisEndMs);
  v.addEventListener('timeupdate',function(){c.style.left=(100*(v.currentTime*1000-a)/(b-a))+'%'});
  tl.addEventListener('click',function(e){var r=ax.getBoundingClientRect();
    v.currentTime=(a+(b-a)*(e.clientX-r.left)/r.width)/1000});
}
document.addEventListener('DOMContentLoaded',function(){
  document.querySelectorAll('[data-filter],#failed-only').forEach(function(s){s.addEventListener('change',avFilter)});
  document.querySelectorAll('[data-sort]').forEach(function(b){b.addEventListener('click',function(){avSort(b.dataset.sort)})});
  avVideo();
});
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{CSS}</style><script>{JS}</script></head>"
        f"<body>{body}</body></html>\n"
    )


def rel(target: str | os.PathLike[str], from_dir: str | os.PathLike[str]) -> str:
    """`target` as a link relative to a page in `from_dir` (works from file://)."""
    return Path(os.path.relpath(Path(target).resolve(), Path(from_dir).resolve())).as_posix()


def pct_left(ms: float, start: float, end: float) -> str:
    """CSS `left` for a time on an axis from `start` to `end` ms: positions proportional to time."""
    span = max(1.0, end - start)
    return f"{100 * (ms - start) / span:.4f}%"


def serve(folder: str | os.PathLike[str], port: int = 8000) -> None:
    """Serve a built site on 127.0.0.1 until interrupted (for convenience: it also opens from file://)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with socketserver.ThreadingTCPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving {folder} at http://127.0.0.1:{httpd.server_address[1]}/ (Ctrl-C stops)", flush=True)
        httpd.serve_forever()
