#!/usr/bin/env python3
"""Browser test of Cloudlet Console (docs/console.md): a real `cloudlet serve` and a real headless Chromium.

Starts `cloudlet serve` on a free loopback port over a temporary data directory, drives Debian's chromium through
chromedriver with Selenium, and walks what a developer does: sign in (a user's web auth token is refused), create a
record type with an indexed field, add a field, create records, query them with a filter and a sort, look at the
query plan, edit a record while someone else changes it and resolve the conflict, deploy and check that production
has the schema, import schema text with an error, create a zone and a subscription, watch the live change feed,
look at the health charts, sign out. Every step asserts what is on the page. A screenshot of each main page goes to
CONSOLE_SCREENSHOTS (default .build/console-screenshots).

Usage: Tests/Browser/console_test.py [PATH/TO/cloudlet]   (default: the debug build's, from `swift build --show-bin-path`)
Fails (exit 1) when chromium, chromedriver or selenium is missing: it is never skipped.
"""
import json
import os
import re
import shutil
import sys
import urllib.request

CONTAINER = "iCloud.com.example.console"
# A 2×2 PNG, for the asset preview.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000002000000020802000000fdd49a73"
    "0000001049444154789c63f8cfc000440c100a001fee03fd8b5f14d40000000049454e44ae426082")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "Tests", "support"))
from cloudlet_serve import CloudletServer, cloudlet_binary  # noqa: E402


def fail(message):
    print(f"console_test: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


try:
    from selenium import webdriver
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    fail("Python selenium is not installed (pip install -r .ci/python-requirements.txt, or .ci/install-deps)")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if not CHROMIUM or not CHROMEDRIVER:
    fail("chromium and chromium-driver are needed (Debian packages; .ci/install-deps installs them)")


def start_server(binary):
    """`cloudlet serve` over a temporary store, with an admin credential, an API token and user alice."""
    try:
        return CloudletServer(binary, CONTAINER, "cloudlet-console-test-", admin=True)
    except RuntimeError as e:
        fail(str(e))


class ConsoleClient:
    """The console API over plain HTTP, as a second admin working beside the browser."""

    def __init__(self, base, admin):
        self.base = base + "/cloudlet/console/api/"
        reply = urllib.request.urlopen(urllib.request.Request(
            self.base + "signin", data=json.dumps({"token": admin}).encode(), method="POST"))
        self.cookie = re.search(r"cloudlet_console=([0-9a-f]+)", reply.headers["Set-Cookie"]).group(1)
        self.csrf = json.load(reply)["csrfToken"]

    def post(self, path, body):
        request = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), method="POST", headers={
            "Cookie": f"cloudlet_console={self.cookie}", "X-Cloudlet-CSRF": self.csrf, "Content-Type": "application/json"})
        return json.load(urllib.request.urlopen(request))

    def database(self, op, body, scope="public", user=None):
        return self.post(f"database/{CONTAINER}/development/{scope}/{op}" + (f"?user={user}" if user else ""), body)


def main():
    binary = cloudlet_binary(sys.argv[1] if len(sys.argv) > 1 else None)
    if not os.access(binary, os.X_OK):
        fail(f"no cloudlet binary at {binary} (build first: swift build)")
    shots = os.environ.get("CONSOLE_SCREENSHOTS", os.path.join(ROOT, ".build", "console-screenshots"))
    os.makedirs(shots, exist_ok=True)
    server = start_server(binary)
    driver = None
    try:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                    "--user-data-dir=" + os.path.join(server.dir, "chromium")]:
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            run(driver, server, shots)
        except Exception:
            driver.save_screenshot(os.path.join(shots, "failure.png"))
            toasts = driver.find_elements(By.ID, "toast")
            print(f"console_test: the page at the failure: {shots}/failure.png; last message: "
                  f"{toasts[0].get_attribute('textContent') if toasts else ''}", file=sys.stderr)
            raise
        print(f"console_test: passed; screenshots in {shots}")
    finally:
        if driver:
            driver.quit()
        server.stop()


def run(d, server, shots):
    # Pages re-render (after a change, or while an index builds): an element found just before may be replaced.
    wait = WebDriverWait(d, 15, ignored_exceptions=[StaleElementReferenceException])

    def step(name):
        print(f"console_test: {name}", flush=True)

    def shot(name):
        d.save_screenshot(os.path.join(shots, f"{name}.png"))

    def css(selector):
        return wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, selector)))

    def visible(selector):
        return wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, selector)))

    def click(selector):
        # Found and clicked in one attempt, again if a re-render replaced the element in between (a click that
        # raised did not happen).
        def attempt(_):
            try:
                el = d.find_element(By.CSS_SELECTOR, selector)
                if not (el.is_displayed() and el.is_enabled()):
                    return False
                el.click()
                return True
            except (StaleElementReferenceException, NoSuchElementException):
                return False
        try:
            wait.until(attempt)
        except TimeoutException:
            raise AssertionError(f"nothing to click at {selector}")

    def button(text, within="body"):
        xpath = f"//{'dialog' if within == 'dialog' else '*'}//button[normalize-space()='{text}']"
        el = wait.until(EC.element_to_be_clickable((By.XPATH, xpath)))
        el.click()
        return el

    def text_appears(selector, text):
        try:
            wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text))
        except TimeoutException:
            found = [e.text for e in d.find_elements(By.CSS_SELECTOR, selector)]
            raise AssertionError(f"'{text}' did not appear in {selector}; it shows {found}")

    def heading(text):
        text_appears("main h1.page", text)

    def dialog_field(label):
        return wait.until(EC.visibility_of_element_located((By.XPATH, f"//dialog//label[normalize-space()='{label}']/following-sibling::*[1]")))

    def go(page):
        click(f".sidebar a[data-page='{page}']")

    def rows(selector="#records-table tbody tr"):
        return [r.text for r in d.find_elements(By.CSS_SELECTOR, selector)]

    console = server.url + "/cloudlet/console/"

    step("security: without a session no console file or API call opens, whatever a user's token claims")
    for path in ["console.js", "schema.js", f"console.js?ckAPIToken={server.api_token}&ckWebAuthToken={server.alice}"]:
        d.get(console + path)
        assert "sign in to the console first" in d.find_element(By.TAG_NAME, "body").text, f"{path} opened without a session"
    d.get(console + f"api/schema?container={CONTAINER}&ckWebAuthToken={server.alice}")
    assert "AUTHENTICATION_REQUIRED" in d.page_source, "the console API answered without a session"
    # alice's web auth token planted as the session cookie: still the sign-in page, still no API.
    d.add_cookie({"name": "cloudlet_console", "value": server.alice, "path": "/cloudlet/console"})
    d.get(console)
    visible("#signin-form")
    assert not d.find_elements(By.CSS_SELECTOR, "nav.sidebar"), "a user's token opened the console"
    d.get(console + "api/session")
    assert "AUTHENTICATION_REQUIRED" in d.page_source, "a user's token opened a console session"
    d.delete_all_cookies()

    step("the sign-in page refuses a user's web auth token")
    d.get(console)
    visible("#token").send_keys(server.alice)
    click("#signin-form button[type=submit]")
    text_appears("#signin-error", "not an admin credential")
    assert d.find_elements(By.CSS_SELECTOR, "#signin-form"), "a user's token left the sign-in page"
    shot("01-signin")

    step("signing in with the admin credential opens the console, on the container the API token names")
    token = d.find_element(By.CSS_SELECTOR, "#token")
    token.clear()
    token.send_keys(server.admin + Keys.ENTER)
    heading("Schema")
    wait.until(lambda _: d.find_element(By.ID, "container").get_attribute("value") == CONTAINER)
    cookies = {c["name"]: c for c in d.get_cookies()}
    session = cookies.get("cloudlet_console")
    assert session and session["httpOnly"] and session.get("sameSite") == "Strict", f"session cookie flags: {session}"
    assert d.execute_script("return document.cookie.includes('cloudlet_console')") is False, "scripts can read the session"

    step("security: a state-changing call without the session's CSRF token is refused, and changes nothing")
    forged = d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/cloudlet/console/api/admin/schema/import?container=' + arguments[0], {method: 'POST',
              body: 'DEFINE SCHEMA RECORD TYPE Forged (x STRING);'})
          .then(async (r) => done([r.status, await r.text()]), (e) => done([0, String(e)]));""", CONTAINER)
    assert forged[0] == 403 and "ACCESS_DENIED" in forged[1], f"no CSRF token: {forged}"

    step("create record type Article with an indexed field")
    button("Add record type")
    dialog_field("Record type name").send_keys("Article")
    dialog_field("Field name").send_keys("title")
    d.find_element(By.XPATH, "//dialog//label[contains(., 'QUERYABLE')]/input").click()
    d.find_element(By.XPATH, "//dialog//label[contains(., 'SORTABLE')]/input").click()
    button("Add type", "dialog")
    text_appears("section[aria-label='Record type Article']", "title")
    box = css("input[aria-label='queryable Article.title']")
    assert box.is_selected() and not box.is_enabled(), "title should be QUERYABLE (set, and not removable here)"
    assert css("input[aria-label='sortable Article.title']").is_selected()
    assert not css("input[aria-label='searchable Article.title']").is_selected()

    step("add field score INT64 SORTABLE, then tick QUERYABLE on it in the table")
    d.find_element(By.XPATH, "//section[@aria-label='Record type Article']//button[normalize-space()='Add field']").click()
    dialog_field("Field name").send_keys("score")
    Select(dialog_field("Type")).select_by_value("INT64")
    d.find_element(By.XPATH, "//dialog//label[contains(., 'SORTABLE')]/input").click()
    button("Add field", "dialog")
    text_appears("section[aria-label='Record type Article']", "INT64")
    click("input[aria-label='queryable Article.score']")
    wait.until(lambda _: not d.find_element(By.CSS_SELECTOR, "input[aria-label='queryable Article.score']").is_enabled())
    step("an index build shows its progress (the badge the schema page puts on a field while its index builds)")
    # Builds of a few records finish before a page can show them: the badge is rendered here from what api/schema
    # says halfway through a build (ConsoleTests checks that api/schema says it).
    badges = d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/cloudlet/console/schema.js').then((m) => done([
          m.buildBadge({name: 'rank', building: true, buildProgress: {recordsDone: 256, recordsTotal: 600}}).textContent,
          m.buildBadge({name: 'rank', building: true, buildProgress: {recordsDone: 256, recordsTotal: 600}}).querySelector('progress').value,
          m.buildBadge({name: 'rank', building: true}).textContent]), (e) => done([String(e)]));""")
    assert badges[0].strip() == "building index… 42 %" and badges[1] == 256 and "queued" in badges[2], f"build badges: {badges}"

    step("security: a custom role with a member, and a grant to it")
    css("#new-role").send_keys("Editors" + Keys.ENTER)
    text_appears("#roles", "Editors")
    css("input[aria-label='User to add to Editors']").send_keys("alice" + Keys.ENTER)
    text_appears("#roles", "alice")
    d.find_element(By.XPATH, "//section[@aria-label='Record type Article']//button[normalize-space()='Edit grants']").click()
    css("dialog input[aria-label='Editors WRITE']").click()
    button("Save grants", "dialog")
    text_appears("section[aria-label='Record type Article'] .grants", "Editors")
    text_appears("section[aria-label='Record type Article'] .grants", "_world")  # the defaults it had are kept
    shot("02-schema")

    step("create three records")
    go("records")
    heading("Records")
    Select(css("#record-type")).select_by_visible_text("Article")
    for title, score in [("banana", 2), ("apple", 1), ("cherry", 3)]:
        click("#new-record")
        dialog_field("Record name").send_keys(title)
        css("dialog input[data-field='title']").send_keys(title)
        css("dialog input[data-field='score']").send_keys(str(score))
        click("#save-record")
        text_appears("#toast", f"Saved {title}")
        wait.until(EC.invisibility_of_element_located((By.CSS_SELECTOR, "dialog[open]")))

    step("query: score > 1, sorted by title descending")
    click("#add-filter")
    Select(css("select[aria-label='Filter 1 field']")).select_by_value("score")
    Select(css("select[aria-label='Filter 1 comparator']")).select_by_value("GREATER_THAN")
    css("input[aria-label='Filter 1 value']").send_keys("1")
    Select(css("#sort-field")).select_by_value("title")
    Select(css("#sort-order")).select_by_value("desc")
    click("#run-query")
    text_appears("#result-count", "2 records")
    found = rows()
    assert len(found) == 2 and found[0].startswith("cherry") and found[1].startswith("banana"), f"query rows: {found}"
    shot("03-records")

    step("the query plan")
    click("#explain")
    text_appears("#plan-summary", "ordered index on 'score'")
    shot("04-explain")
    click("#run-query")
    text_appears("#result-count", "2 records")

    step("edit banana while another admin changes it: the conflict shows both, and the merge saves")
    d.find_element(By.CSS_SELECTOR, "#records-table tr[data-record-name='banana']").click()
    text_appears("#record-fields", "banana")
    click("#edit-record")
    title = css("dialog input[data-field='title']")
    title.clear()
    title.send_keys("banana split")
    other = ConsoleClient(server.url, server.admin)
    current = other.database("records/lookup", {"records": [{"recordName": "banana"}]})["records"][0]
    changed = other.database("records/modify", {"operations": [{"operationType": "update", "record": {
        "recordName": "banana", "recordChangeTag": current["recordChangeTag"], "fields": {"score": {"value": 20}}}}]})
    assert "serverErrorCode" not in changed["records"][0], changed
    click("#save-record")
    text_appears("#conflict", "Someone else changed this record")
    text_appears("#conflict", "20")  # the server's score beside ours
    shot("06-conflict")
    d.find_element(By.CSS_SELECTOR, "input[aria-label=\"Take the server's score\"]").click()
    assert css("dialog input[data-field='score']").get_attribute("value") == "20"
    click("#save-record")
    text_appears("#toast", "Saved banana")
    click("#run-query")
    text_appears("#records-table tr[data-record-name='banana']", "banana split")
    merged = d.find_element(By.CSS_SELECTOR, "#records-table tr[data-record-name='banana']").text
    assert "20" in merged, f"the merged record should keep the server's score: {merged}"

    step("paging through continuation markers")
    click("button[aria-label='Remove filter 1']")
    size = css("#limit")
    size.clear()
    size.send_keys("2")
    click("#run-query")
    text_appears("#result-count", "2 records (more on the next page)")
    first_page = rows()
    click("#next-page")
    text_appears("#result-count", "1 record")
    second_page = rows()
    names = sorted(r.split()[0] for r in first_page + second_page)
    assert names == ["apple", "banana", "cherry"], f"pages: {first_page} then {second_page}"
    click("#first-page")
    text_appears("#result-count", "2 records (more on the next page)")
    assert rows() == first_page, f"the first page again: {rows()}, was {first_page}"
    # The keyboard opens a record: Tab to a row, Enter.
    d.find_element(By.CSS_SELECTOR, "#records-table tbody tr").send_keys(Keys.ENTER)
    text_appears("#dialog-title", "Record ")
    d.find_element(By.CSS_SELECTOR, "dialog").send_keys(Keys.ESCAPE)
    wait.until(EC.invisibility_of_element_located((By.CSS_SELECTOR, "dialog[open]")))

    step("a record with every field type, rendered")
    ck = f"{server.url}/database/1/{CONTAINER}/development/public/"
    auth = f"?ckAPIToken={server.api_token}&ckWebAuthToken={server.alice}"

    def cloudkit(op, body):
        request = urllib.request.Request(ck + op + auth, data=json.dumps(body).encode(), method="POST")
        return json.load(urllib.request.urlopen(request))

    upload = cloudkit("assets/upload", {"tokens": [{"recordType": "Place", "fieldName": "photo"}]})["tokens"][0]["url"]
    single = json.load(urllib.request.urlopen(urllib.request.Request(upload, data=PNG, method="POST")))["singleFile"]
    saved = cloudkit("records/modify", {"operations": [{"operationType": "create", "record": {
        "recordName": "eiffel", "recordType": "Place", "fields": {
            "name": {"value": "Eiffel Tower"},
            "where": {"value": {"latitude": 48.8584, "longitude": 2.2945}, "type": "LOCATION"},
            "opened": {"value": -2547158400000, "type": "TIMESTAMP"},
            "tags": {"value": ["paris", "iron"], "type": "STRING_LIST"},
            "next": {"value": {"recordName": "banana", "action": "NONE"}, "type": "REFERENCE"},
            "data": {"value": "aGVsbG8=", "type": "BYTES"},
            "height": {"value": 330.5, "type": "DOUBLE"},
            "photo": {"value": single, "type": "ASSETID"}}}}]})
    assert "serverErrorCode" not in saved["records"][0], saved
    go("records")
    heading("Records")
    Select(css("#record-type")).select_by_visible_text("Place")
    click("#run-query")
    click("#records-table tr[data-record-name='eiffel']")
    text_appears("#record-fields", "48.85840, 2.29450")
    text_appears("#record-fields", "1889-04-14T00:00:00.000Z")
    text_appears("#record-fields", "330.5")
    text_appears("#record-fields", "5 bytes")
    text_appears("#record-fields", "→ banana")
    # Looked up afresh each time: a re-render of the dialog would leave an element found earlier stale.
    wait.until(lambda _: [li.text for li in d.find_elements(By.CSS_SELECTOR, "#record-fields ol.list li")] == ["paris", "iron"])
    assert d.find_elements(By.CSS_SELECTOR, "#record-fields svg.map circle"), "the location has no map"
    assert d.find_elements(By.XPATH, "//*[@id='record-fields']//a[normalize-space()='Download']"), "the asset has no download link"
    wait.until(lambda _: d.execute_script(
        "const i = document.querySelector('#record-fields img.preview'); return i && i.complete && i.naturalWidth > 0"))
    shot("05-record")
    button("→ banana")
    text_appears("#dialog-title", "Record banana")
    d.find_element(By.CSS_SELECTOR, "dialog").send_keys(Keys.ESCAPE)
    wait.until(EC.invisibility_of_element_located((By.CSS_SELECTOR, "dialog[open]")))

    step("the record editor uploads a file into an asset field, and an edit keeps it")
    poster = os.path.join(server.dir, "louvre.png")
    with open(poster, "wb") as f:
        f.write(PNG)
    click("#new-record")
    dialog_field("Record name").send_keys("louvre")
    css("dialog input[data-field='name']").send_keys("Louvre")
    css("dialog input[type=file][data-field='photo']").send_keys(poster)
    click("#save-record")
    text_appears("#toast", "Saved louvre")
    wait.until(EC.invisibility_of_element_located((By.CSS_SELECTOR, "dialog[open]")))

    def open_louvre():
        click("#run-query")
        click("#records-table tr[data-record-name='louvre']")
        text_appears("#record-fields", f"({len(PNG)} bytes)")
        wait.until(lambda _: d.execute_script(
            "const i = document.querySelector('#record-fields img.preview'); return i && i.complete && i.naturalWidth > 0"))

    open_louvre()
    click("#edit-record")
    text_appears("dialog .asset-edit", f"({len(PNG)} bytes)")  # the editor shows the asset it keeps
    name = css("dialog input[data-field='name']")
    name.clear()
    name.send_keys("Louvre Museum")
    shot("13-record-edit")
    click("#save-record")
    text_appears("#toast", "Saved louvre")
    wait.until(EC.invisibility_of_element_located((By.CSS_SELECTOR, "dialog[open]")))
    open_louvre()
    text_appears("#record-fields", "Louvre Museum")
    d.find_element(By.CSS_SELECTOR, "dialog").send_keys(Keys.ESCAPE)
    wait.until(EC.invisibility_of_element_located((By.CSS_SELECTOR, "dialog[open]")))

    step("comparators follow the field's type: NEAR on a location, LIST_CONTAINS on a list")
    click("#add-filter")
    Select(css("select[aria-label='Filter 1 field']")).select_by_value("where")
    offered = [o.get_attribute("value") for o in css("select[aria-label='Filter 1 comparator']").find_elements(By.TAG_NAME, "option")]
    assert offered == ["NEAR"], f"a location offers {offered}"
    css("input[aria-label='Filter 1 value']").send_keys("48.86, 2.29")
    css("input[aria-label='Filter 1 distance (km)']").send_keys("5")
    click("#add-filter")
    Select(css("select[aria-label='Filter 2 field']")).select_by_value("tags")
    Select(css("select[aria-label='Filter 2 comparator']")).select_by_value("LIST_CONTAINS")
    css("input[aria-label='Filter 2 value']").send_keys("paris")
    click("#run-query")
    text_appears("#result-count", "1 record")
    css("#records-table tr[data-record-name='eiffel']")
    far = css("input[aria-label='Filter 1 value']")
    far.clear()
    far.send_keys("40.7, -74.0")  # New York: nothing within 5 km
    click("#run-query")
    text_appears("#result-count", "0 records")

    step("delete a record")
    Select(css("#record-type")).select_by_visible_text("Article")
    click("#run-query")
    click("#records-table tr[data-record-name='apple']")
    click("#delete-record")
    click("#confirm-delete")
    text_appears("#toast", "Deleted apple")
    wait.until(lambda _: not d.find_elements(By.CSS_SELECTOR, "#records-table tr[data-record-name='apple']"))
    lookup = other.database("records/lookup", {"records": [{"recordName": "apple"}]})["records"][0]
    assert lookup.get("serverErrorCode") == "NOT_FOUND", lookup

    step("deploy to production with a diff preview; production then has the schema")
    go("schema")
    heading("Schema")
    button("Deploy to production…")
    text_appears("#deploy-diff", "record type Article")
    text_appears("#deploy-diff", "index Article.title QUERYABLE")
    shot("07-deploy")
    button("Deploy", "dialog")
    text_appears("#toast", "Deployed")
    Select(css("#environment")).select_by_value("production")
    text_appears("main .lead", "production environment")
    text_appears("section[aria-label='Record type Article']", "score")
    assert css("input[aria-label='sortable Article.title']").is_selected()
    Select(css("#environment")).select_by_value("development")
    text_appears("main .lead", "development environment")

    step("reset development, after a confirmation, forgets what only development has")
    button("Add record type")
    dialog_field("Record type name").send_keys("Scratch")
    dialog_field("Field name").send_keys("note")
    button("Add type", "dialog")
    text_appears("main", "Scratch")
    button("Reset development…")
    dialog_field(f"Type the container name ({CONTAINER}) to confirm").send_keys("wrong")
    button("Reset development", "dialog")
    text_appears("dialog", "does not match")
    confirm = dialog_field(f"Type the container name ({CONTAINER}) to confirm")
    confirm.clear()
    confirm.send_keys(CONTAINER)
    button("Reset development", "dialog")
    text_appears("#toast", "reset to production")
    text_appears("section[aria-label='Record type Article']", "title")
    assert not d.find_elements(By.CSS_SELECTOR, "section[aria-label='Record type Scratch']"), "Scratch survived the reset"

    step("schema text: a syntax error is shown at its line")
    d.get(console + "#schema-text")
    text_appears("main h1.page", "Schema text")
    source = css("#schema-source")
    d.execute_script("arguments[0].value = arguments[1]", source, "DEFINE SCHEMA\n    RECORD TYPE Broken (\n        name STRNG\n    );\n")
    click("#schema-import")
    text_appears("#schema-result", "line 3")
    assert d.find_elements(By.CSS_SELECTOR, "#schema-result pre.errorline"), "the offending line is not shown"
    shot("08-schema-text")

    step("zones: create one in alice's private database")
    go("zones")
    heading("Zones")
    Select(css("#db-scope")).select_by_value("private")
    user = css("#db-user")
    user.clear()
    user.send_keys("alice" + Keys.TAB)
    css("#zone-name").send_keys("Inbox" + Keys.ENTER)
    text_appears("#zones-table", "Inbox")
    shot("09-zones")
    css("#zone-name").send_keys("Scratchpad" + Keys.ENTER)
    text_appears("#zones-table", "Scratchpad")
    click("button[aria-label='Delete zone Scratchpad']")
    button("Delete", "dialog")
    text_appears("#toast", "Zone Scratchpad deleted")
    wait.until(lambda _: "Scratchpad" not in d.find_element(By.ID, "zones-table").text)
    assert "Inbox" in d.find_element(By.ID, "zones-table").text

    step("subscriptions: a query subscription of alice's")
    go("subscriptions")
    heading("Subscriptions")
    wait.until(lambda _: d.find_element(By.ID, "db-user").get_attribute("value") == "alice")
    button("Create")
    text_appears("#subscriptions-table", "query")
    shot("10-subscriptions")
    first_id = css("#subscriptions-table tbody td code").text
    button("Create")  # a second one, then delete the first
    wait.until(lambda _: len(d.find_elements(By.CSS_SELECTOR, "#subscriptions-table tbody tr")) == 2)
    click(f"button[aria-label='Delete subscription {first_id}']")
    button("Delete", "dialog")
    wait.until(lambda _: len(d.find_elements(By.CSS_SELECTOR, "#subscriptions-table tbody tr")) == 1)
    assert first_id not in d.find_element(By.ID, "subscriptions-table").text

    step("changes: from the start, the live view shows what changed before it opened, deletions too")
    go("changes")
    heading("Changes")
    Select(css("#db-scope")).select_by_value("public")
    click("#feed-history")
    click("#live-toggle")
    text_appears("#live-status", "live")
    text_appears("#feed", "cherry")
    text_appears("#feed", "deleted apple")
    click("#feed-history")  # stops the view
    text_appears("#live-status", "stopped")
    button("Clear")

    step("changes: the live view shows a record saved elsewhere, and only what changed after it opened")
    click("#live-toggle")
    text_appears("#live-status", "live")
    assert "cherry" not in d.find_element(By.ID, "feed").text, "without history the view showed an older change"

    other.database("records/modify", {"operations": [{"operationType": "create", "record": {
        "recordName": "durian", "recordType": "Article", "fields": {"title": {"value": "durian"}}}}]})
    text_appears("#feed", "durian")
    shot("11-changes")
    Select(css("#feed-kind")).select_by_value("database")
    Select(css("#db-scope")).select_by_value("private")
    wait.until(lambda _: d.find_element(By.ID, "db-user").get_attribute("value") == "alice")
    css("#db-zone option[value='Inbox']")  # alice's zones are loaded: the picker is done changing
    click("#live-toggle")
    text_appears("#live-status", "live")

    other.database("zones/modify", {"operations": [{"operationType": "create", "zone": {"zoneID": {"zoneName": "Archive"}}}]},
                   scope="private", user="alice")
    other.database("records/modify", {"zoneID": {"zoneName": "Archive"}, "operations": [{"operationType": "create", "record": {
        "recordName": "old-note", "recordType": "Article", "fields": {"title": {"value": "old"}}}}]}, scope="private", user="alice")
    text_appears("#feed", "zone Archive changed")

    step("health: live metric charts")
    go("health")
    heading("Health")
    wait.until(lambda _: d.find_element(By.ID, "metric-requests").text not in ("", "–"))
    wait.until(lambda _: d.find_element(By.ID, "metric-records").text not in ("", "–", "0"))
    WebDriverWait(d, 30, ignored_exceptions=[StaleElementReferenceException]).until(
        lambda _: int(d.find_element(By.ID, "charts").get_attribute("data-samples") or 0) >= 4)
    text_appears("#metric-lag", "single node")  # the replication-lag chart, on a server without replicas
    lag = d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/cloudlet/console/live.js').then((m) => done(m.max(m.parseMetrics(
          'cloudlet_cluster_replica_lag_lsns{log="0",node="a"} 0\\ncloudlet_cluster_replica_lag_lsns{log="0",node="b"} 17\\n'),
          'cloudlet_cluster_replica_lag_lsns')), (e) => done(String(e)));""")
    assert lag == 17, f"the lag chart reads {lag} from a cluster node's metrics, not the slowest replica's 17"
    shot("12-health")

    step("sign out: the session is gone")
    click("#signout")
    visible("#signin-form")
    d.get(server.url + "/cloudlet/console/api/session")
    assert "AUTHENTICATION_REQUIRED" in d.page_source, "the session still works after signing out"

    step("a session that ended (sign-out, expiry, a server restart) signs in again on the page it was on")
    d.get(console + "#zones")
    visible("#token").send_keys(server.admin + Keys.ENTER)
    heading("Zones")
    click("#signout")
    visible("#signin-form")

    step("the browser logged no script error or Content-Security-Policy violation")
    # Refused requests (the user's token at sign-in, the session after sign-out) are logged as failed loads: expected.
    problems = [e["message"] for e in d.get_log("browser")
                if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]]
    assert not problems, f"{len(problems)} browser errors, the first: {problems[:3]}"


if __name__ == "__main__":
    main()
