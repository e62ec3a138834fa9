// Links into the Airflow UI (a task's log) from a page shown in the UI's plugin tab. That iframe is
// sandboxed without top navigation, so a target="_top" link would be blocked; as the frame is
// same-origin, the link is handed to the UI's own router instead (history entry + popstate).
document.addEventListener("click", (e) => {
  const a = e.target.closest && e.target.closest('a[target="_top"]');
  if (!a || window.top === window) return;  // opened on its own: an ordinary link
  try {
    const url = new URL(a.href, window.location.href);
    window.top.history.pushState({}, "", url.pathname + url.search);
    window.top.dispatchEvent(new PopStateEvent("popstate", { state: {} }));
    e.preventDefault();
  } catch (err) {  // another origin: open it in this frame
    a.target = "_self";
  }
});
