// The graph page's layout worker: ForceAtlas2 (graphology-layout-forceatlas2's own
// iteration, vendor/forceatlas2-iterate.js) for a bounded number of iterations, off the
// page's thread. It sends the positions it has every BATCH_MS, so the picture settles
// as one watches, and stops.
"use strict";

var module = { exports: {} }; // the iteration is a CommonJS module
importScripts("/static/vendor/forceatlas2-iterate.js");
const iterate = module.exports;
const BATCH_MS = 100;

function positions(nodes) {
  const order = nodes.length / 10;
  const out = new Float32Array(order * 2);
  for (let i = 0; i < order; i++) {
    out[i * 2] = nodes[i * 10];
    out[i * 2 + 1] = nodes[i * 10 + 1];
  }
  return out;
}

self.onmessage = (event) => {
  const { nodes, edges, settings, iterations } = event.data;
  let done = 0;
  function batch() {
    const started = performance.now();
    while (done < iterations && performance.now() - started < BATCH_MS) {
      iterate(settings, nodes, edges);
      done++;
    }
    const out = positions(nodes);
    self.postMessage({ positions: out, done: done >= iterations }, [out.buffer]);
    if (done < iterations) setTimeout(batch, 0);
  }
  batch();
};
