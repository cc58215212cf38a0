"""A store holding the mock's made-up samples beside real ones, as an older stepsync left one (its
`ingest` took the mock when `--source` was left out): refused by `stepsync ingest` from now on,
reported by `stepsync status`, warned about by `upload`, and cleaned by `stepsync forget --source
mock`, whose deletions reach the server by the next upload, so the server ends with the export's
samples alone."""
import subprocess

from conftest import MOCK_END, STORE_FIXTURE, export_samples, status, stepsync
from test_source_deletions import export_xml, record, upload_json


def test_forget_the_mock_and_the_server_ends_with_the_export_alone(server, tmp_path):
    export = tmp_path / "export.xml"
    export.write_text(export_xml([record(3 * i, 50 + i) for i in range(300)], "2021-03-10 08:00:00 -0800"), encoding="utf-8")
    store, mock_store = tmp_path / "steps", tmp_path / "mock"
    stepsync("ingest", "--store", str(store), "--source", str(export))
    real = export_samples(store)
    assert len(real) == 300
    stepsync("ingest", "--store", str(mock_store), "--source", f"mock:days=20,end={MOCK_END}")
    merged = subprocess.run([STORE_FIXTURE, "merge", str(store), "--from", str(mock_store)],
                            capture_output=True, text=True, check=True)
    mock = status(mock_store)["samples"]
    assert merged.stdout.strip() == f'{{"merged":{mock}}}'

    # Either kind of source is refused in the mixed store, in one line naming the way out.
    for source in (f"mock:days=20,end={MOCK_END}", str(export)):
        refused = stepsync("ingest", "--store", str(store), "--source", source, check=False)
        assert refused.returncode == 1 and refused.stdout == ""
        assert len(refused.stderr.splitlines()) == 1, refused.stderr
        assert f"stepsync forget --store {store} --source mock" in refused.stderr or f"--store {store}-mock" in refused.stderr

    # status says what the store holds and how to mend it.
    counts = status(store)
    assert (counts["realSamples"], counts["mockSamples"], counts["samples"]) == (300, mock, 300 + mock)
    text = stepsync("status", "--store", str(store)).stdout
    assert f"MIXED: {mock:,} samples of the mock beside 300 real ones" in text
    assert f"stepsync forget --store {store} --source mock" in text

    # An upload sends what the store holds, saying so.
    first = stepsync("upload", "--store", str(store), "--api-url", server.url)
    assert "holds" in first.stderr and "samples of the mock" in first.stderr
    assert len(server.live_samples()) == 300 + mock

    forgot = stepsync("forget", "--store", str(store), "--source", "mock").stdout
    assert forgot.splitlines()[0] == f"forgot {mock:,} samples of the mock; 300 samples kept"
    counts = status(store)
    assert (counts["realSamples"], counts["mockSamples"], counts["pendingDeletions"]) == (300, 0, mock)
    assert "sources: real" in stepsync("status", "--store", str(store)).stdout

    second = upload_json(store, server.url)
    assert second["deletionsAcknowledged"] == mock and second["deletionsAppliedByServer"] == mock
    assert server.live_samples() == real == export_samples(store)
    # Forgetting again finds nothing; the export goes into the store again.
    again = stepsync("forget", "--store", str(store), "--source", "mock", "--json").stdout
    assert '"deleted":0' in again
    assert stepsync("ingest", "--store", str(store), "--source", str(export)).returncode == 0
