// agentloop run viewer: live updates over Server-Sent Events, nothing else.
// The server renders every page; this script only puts a pushed part in place. It keeps the
// <details> a person opened (reasoning, sub-agent runs) open across an update, and closes the
// stream when the server says the run has ended. No framework, no other host, no build step.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !live.dataset.stream || !window.EventSource) {
    return;
  }
  var updates = 0;
  var source = new EventSource(live.dataset.stream);

  function openIds() {
    var ids = {};
    live.querySelectorAll("details[id]").forEach(function (node) {
      ids[node.id] = node.open;
    });
    return ids;
  }

  source.addEventListener("update", function (event) {
    var opened = openIds();
    live.innerHTML = event.data;
    Object.keys(opened).forEach(function (id) {
      var node = document.getElementById(id);
      if (node) {
        node.open = opened[id];
      }
    });
    updates += 1;
    live.dataset.updates = String(updates);
  });

  source.addEventListener("end", function () {
    source.close();
    live.dataset.ended = "true";
  });

  window.addEventListener("pagehide", function () {
    source.close();
  });
})();
