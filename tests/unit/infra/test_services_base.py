import pytest

from infra.services import base
from infra.services.base import ServiceError


def test_missing_java_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(base.shutil, "which", lambda _name: None)
    with pytest.raises(ServiceError, match=r"Java is not installed.*bootstrap"):
        base.java_binary()


def test_java_launch_caps_the_heap_and_binds_ipv4():
    argv = base.java_launch("a.Main", "/x/*", 384, args=["conf"], props={"k": "v"})
    assert "-Xmx384m" in argv and "-Djava.net.preferIPv4Stack=true" in argv and "-Dk=v" in argv
    assert argv[-4:] == ["-cp", "/x/*", "a.Main", "conf"]


def test_render_refuses_unknown_placeholders(tmp_path):
    with pytest.raises(KeyError):
        base.render("s3proxy.properties", tmp_path / "out.properties", host="127.0.0.1")
