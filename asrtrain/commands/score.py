"""``asrtrain score``: Kaldi text mode (REF HYP) or Hub5 mode (--stm with --ctm or --hyp-text)."""

from __future__ import annotations

import click

from asrtrain.errors import AsrError


@click.command()
@click.argument("ref", required=False, type=click.Path(dir_okay=False))
@click.argument("hyp", required=False, type=click.Path(dir_okay=False))
@click.option("--stm", type=click.Path(dir_okay=False), help="Hub5 mode: NIST STM reference.")
@click.option("--ctm", type=click.Path(dir_okay=False), help="Hub5 mode: CTM hypothesis.")
@click.option("--hyp-text", type=click.Path(dir_okay=False),
              help="Hub5 mode: Kaldi text hypothesis (needs --segments and --reco2file-and-channel).")
@click.option("--segments", type=click.Path(dir_okay=False), help="Kaldi segments for --hyp-text.")
@click.option("--reco2file-and-channel", "r2fc", type=click.Path(dir_okay=False),
              help="Kaldi reco2file_and_channel for --hyp-text.")
@click.option("--glm", type=click.Path(dir_okay=False),
              help="GLM rewrite rules (default: the shipped asrtrain/resources/hub5.glm).")
@click.option("--hesitations", type=click.Choice(["optional", "keep"]), default="optional", show_default=True,
              help="Hub5: 'optional' never counts %HESITATION as an error (Kaldi practice); 'keep' scores it.")
@click.option("--utt2spk", type=click.Path(dir_okay=False),
              help="Text mode: speaker of each utterance for the .sys table (default: the utt2spk beside REF "
                   "when it has every utterance, else the id's prefix before '-').")
@click.option("--name", help="Name on the %WER line and of the report files (default: text mode, the decode "
                             "dir's name when HYP is DIR/text, e.g. decode_test, else HYP's file name; "
                             "Hub5, the STM's data dir name).")
@click.option("--out-dir", type=click.Path(file_okay=False),
              help="Write NAME.pra, NAME.sys and wer_summary here (their paths are logged).")
@click.option("--cer", is_flag=True,
              help="Text mode: also print the %CER line (characters incl. spaces, aligned with "
                   "sclite's costs as on ESPnet's char trn; written to cer_summary).")
@click.option("--case-sensitive", is_flag=True,
              help="Compare words case-sensitively, as sclite -s (default: A-Z fold to a-z, as sclite).")
def score(ref, hyp, stm, ctm, hyp_text, segments, r2fc, glm, hesitations, utt2spk, name, out_dir, cer,
          case_sensitive) -> None:
    """Score hypotheses and print sclite-style %WER lines.

    Text mode: asrtrain score REF HYP (Kaldi text files). Hub5 mode: asrtrain score --stm REF.stm
    --ctm HYP.ctm, or --hyp-text HYP --segments SEG --reco2file-and-channel R2FC; prints the
    Switchboard, CallHome and all lines. Words are compared case-insensitively, as sclite does
    by default.
    """
    if out_dir is not None:
        from asrtrain.score.report import check_report_name
        check_report_name(name)
    if stm is None:
        if ref is None or hyp is None or ctm or hyp_text:
            raise AsrError("give REF HYP (text mode) or --stm with --ctm/--hyp-text (Hub5 mode)",
                           fix="see asrtrain score --help")
        from asrtrain.score.report import score_text
        total = score_text(ref, hyp, name=name, out_dir=out_dir, utt2spk=utt2spk,
                           case_sensitive=case_sensitive)
        click.echo(total.line(name or click.format_filename(hyp)))
        if cer:
            from asrtrain.score.cer import score_cer
            counts = score_cer(ref, hyp, name=name, out_dir=out_dir, case_sensitive=case_sensitive)
            click.echo(counts.line(name or click.format_filename(hyp), "%CER"))
        return
    if cer:
        raise AsrError("--cer is for text mode (REF HYP)", fix="drop --cer in Hub5 mode")
    if ref or hyp or bool(ctm) == bool(hyp_text):
        raise AsrError("Hub5 mode takes --stm and exactly one of --ctm or --hyp-text (no REF HYP)",
                       fix="see asrtrain score --help")
    from asrtrain.score import hub5
    if hyp_text:
        if not (segments and r2fc):
            raise AsrError("--hyp-text needs --segments and --reco2file-and-channel",
                           fix="pass the decoded data dir's segments and reco2file_and_channel")
        result = hub5.score_hub5_text(stm, hyp_text, segments, r2fc, glm=glm, name=name, out_dir=out_dir,
                                      hesitations=hesitations, case_sensitive=case_sensitive)
    else:
        result = hub5.score_hub5(stm, ctm, glm=glm, name=name, out_dir=out_dir, hesitations=hesitations,
                                 case_sensitive=case_sensitive)
    label = name or hub5.default_name(stm)
    for subset, counts in result.items():
        click.echo(counts.line(f"{label} {subset}"))
