// memstack dashboard: the little that needs a script (no library). A forget button stays disabled
// until the confirmation field holds exactly what it must (the server checks it again).
document.addEventListener("DOMContentLoaded", () => {
  for (const input of document.querySelectorAll("input[data-must-be]")) {
    const button = input.form.querySelector("button[type=submit]");
    const check = () => { button.disabled = input.value !== input.dataset.mustBe; };
    input.addEventListener("input", check);
    check();
  }
});
