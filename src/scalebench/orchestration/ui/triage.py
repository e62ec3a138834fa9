"""Alert triage: the list of alert groups, a group's page, and its actions (take it, set a state,
add a note). A change needs edit access to the report DAG (which sends the alerts), a request from
this site's own page (same-site check) and the page's form token, an HMAC of the user and the
group under the deployment's JWT secret."""
from __future__ import annotations

import re
from typing import Annotated, Callable
from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, Path as PathParam, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from scalebench.core import tables
from scalebench.core.alert_rules import STATES
from scalebench.core.tables import Column, Link
from scalebench.core.dag_ids import REPORT_DAG_ID
from scalebench.orchestration.ui import pages
from scalebench.orchestration.ui.profile_sections import diff_sections
from scalebench.orchestration.ui.shared import BENCHMARK_QUERY, EXPECTED, bases, store
from scalebench.report.alert_messages import progress

GROUP_ID = Annotated[int, PathParam(ge=1, le=2**31 - 1)]
STATE_QUERY = Annotated[str | None, Query(pattern=r"^[a-z]{0,16}$", max_length=16)]
OWNER_QUERY = Annotated[str | None, Query(max_length=100)]
ALERT_FIELDS = {"state": "one of the states the form offers", "owner": "a name of 1-100 printable characters",
                "note": "at most 2000 characters", "nothing to change": "a state or a note",
                "group": "an existing alert group"}


triage = APIRouter()


async def current_user(request: Request):
    """The logged-in Airflow user (the app's login dependency has already checked the token)."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    return await get_user(request, None, await bearer_scheme(request))


def may_edit(user) -> bool:
    """Whether the user may change alert groups: edit access to the report DAG, which sends them."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    return get_auth_manager().is_authorized_dag(method="PUT", user=user, details=DagDetails(id=REPORT_DAG_ID))


TOKEN_TTL_S = 12 * 3600  # a group page's form token works this long; a new page view issues a new one


def _action_token(user, group_id: int, issued: int | None = None) -> str:
    """The token a group page's forms carry: its issue time, and an HMAC of the user, the group and
    that time keyed by the deployment's JWT secret, so a page on another site cannot make one and a
    leaked one stops working after TOKEN_TTL_S."""
    import hashlib
    import hmac
    import time

    from airflow.configuration import conf

    key = conf.get("api_auth", "jwt_secret", fallback="") or conf.get("api", "secret_key", fallback="")
    if not key:
        raise HTTPException(503, "The deployment has no [api_auth] jwt_secret: alert actions are off.")
    issued = int(time.time()) if issued is None else issued
    mac = hmac.new(key.encode(), f"{user.get_id()}:{group_id}:{issued}".encode(), hashlib.sha256).hexdigest()
    return f"{issued}.{mac}"


TOKEN = re.compile(r"^([0-9]{1,12})\.[0-9a-f]{64}$")  # ASCII only: compare_digest refuses other text
CLOCK_SKEW_S = 60  # a token issued this far ahead of this server's clock is still taken


def _token_refusal(token: str, user, group_id: int) -> str | None:
    """Why a form's token is refused (None: it is this user's for this group, and current)."""
    import hmac
    import time

    form = TOKEN.match(token)
    if form is None or not hmac.compare_digest(token, _action_token(user, group_id, int(form.group(1)))):
        return "Refused: the form's token is missing or not this page's; reload the page."
    age = time.time() - int(form.group(1))
    if age < -CLOCK_SKEW_S:
        return "Refused: the form's token is from the future (was a clock set back?); reload the page."
    if age > TOKEN_TTL_S:
        return f"Refused: the page is older than {TOKEN_TTL_S // 3600} hours; reload it and try again."
    return None


def _same_site(request: Request) -> bool:
    """A browser's POST from this site: Sec-Fetch-Site same-origin (or absent), and an Origin, when
    sent, that is the origin the request was addressed to (its scheme and Host: the service reached
    by any of its names), Airflow's [api] base_url, or one in SCALEBENCH_TRUSTED_ORIGINS (a proxy
    in front that rewrites Host). Compared as browsers do: case and default ports normalised."""
    import os

    from airflow.configuration import conf

    from scalebench.core.web_origin import AddressError, origin_of, trusted_origins

    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    try:
        trusted = trusted_origins(os.environ.get("SCALEBENCH_TRUSTED_ORIGINS"))
    except AddressError:  # refused at start by `make airflow`; here a bad list trusts nothing more
        trusted = []
    own = origin_of(f"{request.url.scheme}://{request.headers.get('host', '')}")
    allowed = {own, origin_of(conf.get("api", "base_url", fallback="") or ""), *trusted} - {None}
    return origin_of(origin) in allowed


def _groups():
    from scalebench.store.alert_groups import AlertGroups

    return AlertGroups(store())

@triage.get("/alerts", response_class=HTMLResponse)
def alerts(request: Request, state: STATE_QUERY = None, benchmark: BENCHMARK_QUERY = None, owner: OWNER_QUERY = None):
    from scalebench.core.alert_rules import AlertStateError

    base, _ = bases(request)
    try:
        found = _groups().groups(state=state or None, benchmark=benchmark or None, owner=owner or None)
    except AlertStateError:
        raise HTTPException(422, f"state: expected {EXPECTED['state']}.") from None
    return _alerts_page(base, found, state, benchmark, owner, STATES)

@triage.get("/api/alerts.json")
def alerts_export(state: STATE_QUERY = None, benchmark: BENCHMARK_QUERY = None):
    from scalebench.core.alert_rules import AlertStateError

    try:
        return JSONResponse(_groups().groups(state=state or None, benchmark=benchmark or None))
    except AlertStateError:
        raise HTTPException(422, f"state: expected {EXPECTED['state']}.") from None

@triage.get("/alerts/{group_id}", response_class=HTMLResponse)
def alert(request: Request, group_id: GROUP_ID, user=Depends(current_user)):
    base, ui = bases(request)
    group = _groups().group(group_id)
    if group is None:
        raise HTTPException(404, "No such alert group (the alerts page lists them).")
    editor = may_edit(user)
    return _alert_page(base, ui, group, editor, _action_token(user, group_id) if editor else "", STATES)

@triage.post("/alerts/{group_id}")
async def alert_action(request: Request, group_id: GROUP_ID, user=Depends(current_user)):
    """Take a group, set its state or add a note; then back to its page. Refused (403) for a user
    without edit access, a request from another site or without the page's token; a bad field is
    a 422 naming it."""
    from starlette.concurrency import run_in_threadpool

    if not may_edit(user):
        raise HTTPException(403, "Changing an alert group needs edit access to the report DAG.")
    if not _same_site(request):
        raise HTTPException(403, "Refused: a change must come from this site's own alert page.")
    form = await request.form(max_files=0, max_fields=8, max_part_size=8192)
    token, action = str(form.get("token") or ""), form.get("action")
    refused = _token_refusal(token, user, group_id)
    if refused:
        raise HTTPException(403, refused)
    # the store's work (a lock it may wait for) in a worker thread: the api-server's event loop serves the others
    await run_in_threadpool(_apply, group_id, str(user.get_name()), action, form.get("state"),
                            str(form.get("note") or "") or None)
    base, _ = bases(request)
    return RedirectResponse(f"{base}/alerts/{group_id}", status_code=303)


def _apply(group_id: int, who: str, action, state, note: str | None) -> None:
    """One action on a group in the store; an HTTP refusal naming the field or the state found."""
    from scalebench.core.alert_rules import AlertStateError, MoveRefused

    try:
        if action == "take":
            _groups().set(group_id, who, state="triaged", owner=who, note=note)
        elif action == "state":
            _groups().set(group_id, who, state=str(state or ""), note=note)
        elif action == "note":
            _groups().set(group_id, who, note=note)
        else:
            raise HTTPException(422, "action: expected take, state or note.")
    except MoveRefused as exc:  # names only states and counts: shown as it is
        raise HTTPException(409, f"{exc}.") from None
    except AlertStateError as exc:
        field = str(exc).split(":", 1)[0]
        raise HTTPException(404 if field == "group" else 422,
                            f"{field}: expected {ALERT_FIELDS.get(field, 'a valid value')}.") from None


# The pages: the list and one group, with its figures, events and actions (the parts are pages').
def _group_link(base: str) -> Callable[[dict], list[Link]]:
    return lambda g: [Link(f"#{g['id']}", f"{base}/alerts/{g['id']}")]


def _alerts_page(base: str, groups: list[dict], state: str | None, benchmark: str | None, owner: str | None,
                 states: tuple[str, ...]) -> str:
    """Open groups first, filtered by state, benchmark and owner (a GET form)."""
    columns: list[Column[dict]] = [
        Column("group", lambda g: f"#{g['id']}", links=_group_link(base)), Column("state", lambda g: g["state"]),
        Column("owner", lambda g: g["owner"] or ""), Column("first night", lambda g: g["first_night"]),
        Column("last night", lambda g: g["last_night"]), Column("figures", lambda g: len(g["figures"]), numeric=True),
        Column("benchmarks", lambda g: ", ".join(g["benchmarks"])), Column("suspect", lambda g: g["suspect"] or "none")]
    return pages.render("alerts.html", "Alert groups", base, table=tables.build(columns, groups, lambda g: g["state"]),
                        state=state, benchmark=benchmark, owner=owner, states=states)


def _alert_page(base: str, ui: str, group: dict, can_edit: bool, token: str, states: tuple[str, ...]) -> str:
    """One group: what it is, its figures (each benchmark's history linked, where the change is
    marked), the bisect to start where its suspect is an image, its event log, and the actions a
    user who may edit gets (take it, set a state, add a note)."""
    figures: list[Column[dict]] = [
        Column("benchmark", lambda f: f["benchmark"],
               links=lambda f: [Link(f["benchmark"], f"{base}/benchmarks/{quote(f['benchmark'], safe='')}")]),
        Column("GPUs", lambda f: f["gpus"], numeric=True), Column("precision", lambda f: f["precision"]),
        Column("metric", lambda f: f["metric"]),
        Column("worst", lambda f: f"{f['worst_change'] * 100:+.1f}% worse", numeric=True),
        Column("nights", lambda f: f"{f['first_night']} .. {f['last_night']}"),
        Column("back", lambda f: f"back on {f['back_night']}" if f.get("back_night") else "not yet"),
        Column("latest", lambda f: f["line"])]
    events: list[Column[dict]] = [
        Column("when", lambda e: e["at"] or ""), Column("who", lambda e: e["who"]), Column("what", lambda e: e["kind"]),
        Column("state", lambda e: f"{e['from'] or ''} -> {e['to']}" if e["to"] else ""),
        Column("note", lambda e: e["note"] or "")]
    partly = progress(group)
    about = [pages.text(f"State {group['state']}" + (f", owner {group['owner']}" if group["owner"] else ", no owner")
                        + (f" ({partly})" if partly else "")
                        + f"; first night {group['first_night']}, last {group['last_night']}. Suspect: "),
             pages.text(group["suspect"] or "no change of image or config")]
    bisect = None
    if group["suspect_kind"] == "image" and group["previous_image"] and group["new_image"]:
        bisect = [pages.text(f"Bisect between {group['previous_image']} and {group['new_image']}: "),
                  pages.link(f"{ui}/dags/scalebench_bisect", "the scalebench_bisect DAG", top=True)]
    diffs = diff_sections(base, [(f"Where the step's time went: {f['benchmark']} at {f['gpus']} GPU(s), {f['precision']}",
                                  f["profile_diff"]) for f in group["figures"] if f.get("profile_diff")], "profile")
    return pages.render("alert.html", f"Alert group #{group['id']}", base, group=group, about=about, bisect=bisect,
                        figures=tables.build(figures, group["figures"]), sections=diffs,
                        events=tables.build(events, group.get("events", [])), can_edit=can_edit, token=token,
                        states=states)
