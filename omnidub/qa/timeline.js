// omnidub's timeline, one for qa.html and the review page: a programme's lanes at a zoom, a ruler, a playhead
// that follows a player (or whatever media element is heard, told by follow()), and a click on the lanes that seeks
// the player. Its pages draw the blocks, placed in percent of the programme, so a zoom only changes the lanes' width.
window.omnidubTimeline = function (options) {
  "use strict";
  const {lanes, ruler, playhead, scroll, player} = options;
  let program = Math.max(options.program, 1);
  let pps = options.pps === undefined ? null : options.pps;  // pixels a second; null: fit, or `fit` when wider
  const fit = options.fit || 8;
  function width() { return lanes.getBoundingClientRect().width || 1; }
  function clock(t) {
    const h = Math.floor(t / 3600), m = Math.floor(t % 3600 / 60), s = Math.floor(t % 60);
    const mm = String(m).padStart(2, "0"), ss = String(s).padStart(2, "0");
    return h ? h + ":" + mm + ":" + ss : mm + ":" + ss;
  }
  function layout() {
    lanes.style.width = pps === null ? "max(100%, " + Math.ceil(program * fit) + "px)"
      : pps === 0 ? "100%" : "max(100%, " + Math.ceil(program * pps) + "px)";
    const perSecond = width() / program, steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
    const step = steps.find((s) => s * perSecond >= 70) || 3600;
    const ticks = [];
    for (let t = 0; t <= program; t += step) {
      const tick = document.createElement("span");
      tick.style.left = (100 * t / program) + "%";
      tick.textContent = clock(t);
      ticks.push(tick);
    }
    ruler.replaceChildren(...ticks);
    place();
    if (options.onLayout) options.onLayout();
  }
  function show(t) {
    // Scroll the lanes so that second t is in view.
    const x = width() * t / program;
    if (x < scroll.scrollLeft || x > scroll.scrollLeft + scroll.clientWidth - 20)
      scroll.scrollLeft = Math.max(0, x - scroll.clientWidth / 3);
  }
  // What the playhead follows: the player, or another media element with its start in the programme (at()). A
  // player holding a span of the programme (the review's programme) says where it starts with `offset`.
  const offset = options.offset || (() => 0);
  let heard = player || null, at = offset;
  function place() {
    const t = heard ? at() + heard.currentTime : 0;
    playhead.style.left = (100 * t / program) + "%";
    if (heard && !heard.paused) show(t);
  }
  function follow(media, start) {
    if (heard) heard.removeEventListener("timeupdate", place);
    heard = media || player || null;
    at = typeof start === "function" ? start : start === undefined && heard === player ? offset : () => start || 0;
    if (heard) heard.addEventListener("timeupdate", place);
    place();
  }
  function seek(t, play) {
    if (options.seek) return options.seek(t, play);  // the page loads what plays second t itself
    if (!player || !player.getAttribute("src")) return;
    player.currentTime = t;
    if (heard !== player) follow(player);
    place();
    if (play) player.play();
  }
  lanes.addEventListener("click", (e) => {
    if (options.picked && options.picked(e)) return;
    const box = lanes.getBoundingClientRect();
    seek(program * (e.clientX - box.left) / box.width, false);
  });
  if (heard) heard.addEventListener("timeupdate", place);
  window.addEventListener("resize", layout);
  layout();
  return {
    layout, seek, show, place,
    follow,  // follow(media, start): the playhead follows media, whose 0 s is at `start` (seconds, or a function)
    zoom(z) {  // a number of pixels a second, "in" or "out" (twice or half what is shown), or "fit"
      const now = width() / program;
      pps = z === "fit" ? 0 : z === "in" ? now * 2 : z === "out" ? Math.max(0.05, now / 2) : z;
      layout();
      return pps || width() / program;
    },
    setProgram(seconds) { program = Math.max(seconds, 1); layout(); },
    span() {  // the seconds in view
      const w = width();
      return [program * scroll.scrollLeft / w, program * (scroll.scrollLeft + scroll.clientWidth) / w];
    },
    left(t) { return (100 * t / program) + "%"; },
  };
};
