// The trace view's copy button: copies the full trace id (to paste into an OTel viewer).
document.addEventListener("click", function (event) {
  var button = event.target.closest("[data-copy]");
  if (!button) return;
  var source = document.getElementById(button.dataset.copy);
  if (!source) return;
  var text = source.textContent.trim();
  var done = function (label) {
    button.textContent = label;
    setTimeout(function () { button.textContent = "Copy"; }, 1500);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(function () { done("Copied"); }, function () { done("Select and copy"); });
  } else {
    // Plain http (no clipboard API): select the id so that Ctrl+C copies it.
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    done(document.execCommand && document.execCommand("copy") ? "Copied" : "Selected");
  }
});
