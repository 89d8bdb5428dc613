// The submit page's source editor: CodeMirror (console/static/vendor/codemirror) over each
// textarea[data-editor]. Without JavaScript the textarea still works. A chosen file is read into the
// editor (the server also accepts it as an upload when scripts are off).
(function () {
  "use strict";
  function setUp() {
    if (typeof CodeMirror === "undefined") return;
    document.querySelectorAll("textarea[data-editor]").forEach(function (area) {
      var editor = CodeMirror.fromTextArea(area, {
        mode: area.dataset.editor, lineNumbers: true, indentUnit: 4, tabSize: 4, indentWithTabs: false,
        viewportMargin: Infinity,
        extraKeys: {Tab: function (cm) { cm.replaceSelection("    "); }},
      });
      editor.getWrapperElement().setAttribute("data-testid", "editor");
      area.form.addEventListener("submit", function () { editor.save(); });
      var upload = area.form.querySelector("input[type=file][name=upload]");
      if (upload) {
        upload.addEventListener("change", function () {
          var file = upload.files[0];
          if (!file) return;
          file.text().then(function (text) {
            editor.setValue(text);
            upload.value = "";  // the editor's text is what is checked and submitted now
          });
        });
      }
      area.editor = editor;
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
