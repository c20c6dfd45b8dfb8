'use strict';
// The sign-in page: trades an admin credential for a console session (an HttpOnly cookie), then loads the console.
document.getElementById('signin-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const error = document.getElementById('signin-error');
  error.hidden = true;
  const token = document.getElementById('token').value.trim();
  try {
    const response = await fetch('/cloudlet/console/api/signin', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token }),
      credentials: 'same-origin',
    });
    if (response.ok) {
      window.location.replace('/cloudlet/console/');
      return;
    }
    const body = await response.json().catch(() => ({}));
    error.textContent = body.reason || `Sign-in failed (HTTP ${response.status}).`;
  } catch (e) {
    error.textContent = `Cannot reach the server: ${e.message}`;
  }
  error.hidden = false;
});
