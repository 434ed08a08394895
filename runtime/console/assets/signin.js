"use strict";
(function () {
  const q = new URLSearchParams(location.search);
  const next = q.get("next");
  if (next && next.startsWith("/") && !next.startsWith("//")) {
    document.getElementById("next").value = next;
  }
  if (q.get("error")) {
    document.getElementById("signin-error").hidden = false;
  }
})();
