"""The server's one request entry (spamnb.server.handler): a front end builds
a Request and awaits RequestHandler.handle, run with run_eagerly, so a check
whose model is loaded is answered in the callback that read it (no task),
and one whose model must be read first goes on in a task; both front ends
(SPAMD, the milter) go through it (tests/test_serve.py, tests/test_milter.py
run them against spamc and Postfix)."""

import asyncio
import shutil

import pytest

from conftest import REPO
from spamnb.server.daemon import Server
from spamnb.server.handler import Request, run_eagerly
from spamnb.server.tell import Lesson

MESSAGE = sorted((REPO / "corpora" / "spam").iterdir())[0].read_bytes()


@pytest.fixture(scope="module")
def site(tmp_path_factory, sample_model):
    home = tmp_path_factory.mktemp("entry")
    shutil.copyfile(sample_model, home / "model.spamnb")    # what `spamnb train -q -j 1 -m MODEL corpora/` writes
    (home / "users" / "erin").mkdir(parents=True)
    shutil.copyfile(home / "model.spamnb", home / "users" / "erin" / "model.spamnb")
    return home


def _server(site, *more):
    given = {"model": str(site / "model.spamnb"), "models_dir": str(site / "users"), "listen": [str(site / "s")]}
    given.update(more)
    server = Server(given)
    server.load_site_model()
    return server


def test_run_eagerly_ends_at_once_or_goes_on_in_a_task():
    seen = []

    async def now():
        return 7

    async def later():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled inside")
            raise

    async def failing():
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.set_exception, ValueError("boom"))
        try:
            await future
        except ValueError as exc:
            return f"caught {exc}"

    async def main():
        tasks = len(asyncio.all_tasks())
        assert run_eagerly(now()) == (True, 7) and len(asyncio.all_tasks()) == tasks   # no task made
        answered, task = run_eagerly(later())
        assert not answered and isinstance(task, asyncio.Task)
        await asyncio.sleep(0.01)
        task.cancel()   # a request's timeout: the coroutine sees it, as in a task of its own
        with pytest.raises(asyncio.CancelledError):
            await task
        answered, task = run_eagerly(failing())     # a future's error reaches the coroutine that awaited it
        assert not answered and await task == "caught boom"

    asyncio.run(main())
    assert seen == ["cancelled inside"]


def test_a_loaded_model_is_answered_without_waiting(site):
    server = _server(site)

    async def main():
        server.models.run = lambda function: asyncio.get_running_loop().run_in_executor(server.loader, function)
        tasks = len(asyncio.all_tasks())
        answered, checked = run_eagerly(server.handler.handle(Request(MESSAGE, "nobody", False)))
        assert answered and checked.label == "spam" and len(asyncio.all_tasks()) == tasks
        # erin's own model is not loaded yet: read in a thread, a task meanwhile; then at once
        answered, task = run_eagerly(server.handler.handle(Request(MESSAGE, "erin", False)))
        assert not answered
        late = await task
        assert late.label == "spam" and late.paths[0].endswith("erin/model.spamnb")
        answered, checked = run_eagerly(server.handler.handle(Request(MESSAGE, "erin", False)))
        assert answered and checked.score == late.score and checked.paths == late.paths
        # a lesson goes through the same entry (refused here: the server does not learn)
        with pytest.raises(Exception, match="TELL is off"):
            run_eagerly(server.handler.handle(Request(lesson=Lesson(MESSAGE, "erin", True, True, False))))

    try:
        asyncio.run(main())
    finally:
        server.loader.shutdown()
        server.learners.shutdown()
