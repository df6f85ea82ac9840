//! The interactive timeline: hand-written inline SVG and a little inline JS (no network, no
//! framework). One lane per node with a rect per span (hover: state, leader, epoch, phase,
//! zxids, when it was read), fault intervals behind the lanes (hover: what was done to whom),
//! a line at each violation in its checker's color; a click opens the history at that event
//! (`history.jsonl?around=INDEX`, the history view under `fle-chaos serve`); the wheel zooms
//! the time axis around the pointer, dragging pans, a double click resets.
//!
//! The x unit is the millisecond. Spans narrower than `1 / MAX_COLUMNS` of the run are merged
//! into their neighbour (first drawn wins, as in the PNG), so a long run stays a small page.

use super::lane::LaneState;
use super::scan::RunData;
use super::text::escape;
use super::violations::{hex, Violation};
use crate::history::view::FaultInterval;
use std::fmt::Write;

/// Resolution of the lanes at full zoom.
const MAX_COLUMNS: f64 = 4000.0;
const LANE: f64 = 24.0;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn lane_fill(s: LaneState) -> String {
    let c = super::plot::style::lane_color(s);
    hex(c)
}

/// The section: heading, hover line, the SVG with lane names, the axis and the script.
pub fn section(data: &RunData, violations: &[Violation]) -> String {
    let t_end = ms(data.t_end_ns).max(1.0);
    let lanes = data.nodes.len().max(1) as f64;
    let height = lanes * LANE;
    let mut h = String::with_capacity(1 << 16);
    h += "<h2 id=\"interactive\">Interactive timeline</h2>\n\
          <p class=\"hint\">Hover a span or a fault for what it was, click to open the history \
          at that event; the wheel zooms, dragging pans, a double click resets.</p>\n";
    h +=
        "<div id=\"tl-tip\" class=\"tip\">&#160;</div>\n<div class=\"tl\"><div class=\"tl-names\">";
    for name in data.nodes.keys() {
        let _ = write!(h, "<div style=\"height:{LANE}px\">{}</div>", escape(name));
    }
    let _ = write!(
        h,
        "</div><svg id=\"tl-svg\" xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" \
         height=\"{height}\" viewBox=\"0 0 {t_end:.1} {height}\" preserveAspectRatio=\"none\" \
         data-end=\"{t_end:.1}\" data-h=\"{height}\">"
    );
    for f in &data.faults {
        fault(&mut h, f, t_end, height);
    }
    let min_w = t_end / MAX_COLUMNS;
    for (i, (name, node)) in data.nodes.iter().enumerate() {
        let y = i as f64 * LANE + LANE * 0.15;
        let mut drawn_to = f64::NEG_INFINITY;
        for s in &node.spans {
            let (a, b) = (ms(s.start_ns), ms(s.end_ns).max(ms(s.start_ns) + min_w));
            if b <= drawn_to {
                continue;
            }
            let a = a.max(drawn_to);
            drawn_to = b;
            let _ = write!(
                h,
                "<rect class=\"span\" x=\"{a:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" \
                 fill=\"{}\" data-i=\"{}\"><title>{}</title></rect>",
                (b - a).max(0.1),
                LANE * 0.7,
                lane_fill(s.state),
                s.start_index,
                escape(&span_text(name, s))
            );
        }
    }
    for v in violations {
        let x = ms(v.time_ns);
        let _ = write!(
            h,
            "<line class=\"violation\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"0\" y2=\"{height}\" \
             stroke=\"{}\" stroke-width=\"2\" vector-effect=\"non-scaling-stroke\"{}>\
             <title>{}: evidence at {}</title></line>",
            hex(v.color),
            v.index
                .map_or(String::new(), |i| format!(" data-i=\"{i}\"")),
            escape(&v.checker),
            crate::duration::moment(v.time_ns)
        );
    }
    h += "</svg></div>\n<div id=\"tl-axis\" class=\"tl-axis\"></div>\n";
    h += "<p><button type=\"button\" id=\"tl-in\">zoom in</button> \
          <button type=\"button\" id=\"tl-out\">zoom out</button> \
          <button type=\"button\" id=\"tl-reset\">whole run</button></p>\n";
    h += "<script>";
    h += SCRIPT;
    h += "</script>\n";
    h
}

/// "n5 LEADING · leader 5 · epoch 1 · broadcast · zxid 0x100000003 → 0x100000009 · read from
/// 5.200 s to 6.100 s".
pub fn span_text(node: &str, s: &super::scan::Span) -> String {
    let mut t = format!("{node} {}", s.state.name());
    if let Some(l) = s.leader {
        let _ = write!(t, " · leader {l}");
    }
    if s.state != LaneState::Down {
        let _ = write!(t, " · epoch {}", s.epoch);
        if let Some(p) = s.phase {
            let _ = write!(t, " · {}", format!("{p:?}").to_lowercase());
        }
        if s.zxid_first == s.zxid_last {
            let _ = write!(t, " · zxid {:#x}", s.zxid_first);
        } else {
            let _ = write!(t, " · zxid {:#x} → {:#x}", s.zxid_first, s.zxid_last);
        }
    }
    let _ = write!(
        t,
        " · read from {} to {} (history index {})",
        crate::duration::moment(s.start_ns),
        crate::duration::moment(s.end_ns),
        s.start_index
    );
    t
}

fn fault(h: &mut String, f: &FaultInterval, t_end: f64, height: f64) {
    let a = ms(f.start_ns);
    let b = f.end_ns.map_or(t_end, ms);
    let whom = if f.nodes.is_empty() {
        String::new()
    } else {
        format!(" of {}", f.nodes.join(", "))
    };
    let until = match f.end_ns {
        Some(e) => format!("until {}", crate::duration::moment(e)),
        None => "still in force at the end".into(),
    };
    let _ = write!(
        h,
        "<rect class=\"fault\" x=\"{a:.1}\" y=\"0\" width=\"{:.1}\" height=\"{height}\" \
         fill=\"{}\" fill-opacity=\"0.2\" data-i=\"{}\"><title>fault: {}{} from {} {}</title></rect>",
        (b - a).max(0.1),
        hex(super::plot::style::fault_color(f.kind)),
        f.start_index,
        f.kind.name(),
        escape(&whom),
        crate::duration::moment(f.start_ns),
        until
    );
}

/// CSS of the section.
pub const CSS: &str = "
.tl{display:flex;background:#fff;border:1px solid #ddd;user-select:none}
.tl-names{flex:0 0 44px;font-size:13px}.tl-names div{display:flex;align-items:center;padding-left:6px}
#tl-svg{flex:1 1 auto;min-width:0;cursor:grab;display:block}
#tl-svg rect.span:hover{stroke:#000;stroke-width:1;vector-effect:non-scaling-stroke}
.tl-axis{position:relative;height:18px;margin-left:46px;font-size:12px;color:#555}
.tl-axis span{position:absolute;transform:translateX(-50%);white-space:nowrap}
.tip{font-size:13px;min-height:18px;padding:4px 6px;background:#fffbe6;border:1px solid #eee;overflow-wrap:anywhere}
";

const SCRIPT: &str = r#"(function(){
var svg=document.getElementById('tl-svg');if(!svg)return;
var T=+svg.getAttribute('data-end'),H=svg.getAttribute('data-h'),v0=0,v1=T,drag=null;
var tip=document.getElementById('tl-tip'),axis=document.getElementById('tl-axis');
function ticks(){var s=v1-v0,st=Math.pow(10,Math.floor(Math.log10(s/6)));
[1,2,5,10].some(function(m){if(s/(st*m)<=8){st*=m;return true}return false});
var d=st>=1000?0:(st>=100?1:(st>=10?2:3)),h='';
for(var t=Math.ceil(v0/st)*st;t<=v1;t+=st){h+='<span style="left:'+((t-v0)/s*100)+'%">'+(t/1000).toFixed(d)+' s</span>'}
axis.innerHTML=h;}
function set(a,b){var w=Math.min(T,Math.max(b-a,T/1e5));a=Math.max(0,Math.min(a,T-w));v0=a;v1=a+w;
svg.setAttribute('viewBox',v0+' 0 '+w+' '+H);ticks();}
function zoom(k,f){var c=v0+f*(v1-v0),w=(v1-v0)*k;set(c-f*w,c-f*w+w);}
svg.addEventListener('wheel',function(e){e.preventDefault();var r=svg.getBoundingClientRect();
zoom(e.deltaY<0?0.8:1.25,(e.clientX-r.left)/r.width);},{passive:false});
svg.addEventListener('mousedown',function(e){drag={x:e.clientX,a:v0,b:v1,moved:false};});
window.addEventListener('mousemove',function(e){if(!drag)return;var r=svg.getBoundingClientRect();
if(Math.abs(e.clientX-drag.x)>3)drag.moved=true;if(!drag.moved)return;
var d=(e.clientX-drag.x)/r.width*(drag.b-drag.a);set(drag.a-d,drag.b-d);});
window.addEventListener('mouseup',function(){setTimeout(function(){drag=null;},0);});
svg.addEventListener('mouseover',function(e){var t=e.target.querySelector&&e.target.querySelector('title');
if(t)tip.textContent=t.textContent;});
svg.addEventListener('click',function(e){if(drag&&drag.moved)return;var i=e.target.getAttribute('data-i');
if(i!==null)window.location.href='history.jsonl?around='+i;});
svg.addEventListener('dblclick',function(){set(0,T);});
document.getElementById('tl-in').onclick=function(){zoom(0.5,0.5);};
document.getElementById('tl-out').onclick=function(){zoom(2,0.5);};
document.getElementById('tl-reset').onclick=function(){set(0,T);};
set(0,T);})();"#;
