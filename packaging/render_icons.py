"""Render resources/icons/specchat.svg to the PNG sizes, the Windows .ico and the macOS .icns."""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ICONS = ROOT / "resources" / "icons"
SOURCE = ICONS / "specchat.svg"

#: The hicolor sizes a desktop asks for; 512 also serves as the macOS Retina 256@2x.
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
#: Windows shell sizes; 256 is the largest an .ico entry may be.
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
#: icns element types holding PNG data, by pixel size (Apple's icns format; 10.7+ reads
#: PNG in every one of them).
ICNS_TYPES = (
    (b"icp4", 16),
    (b"icp5", 32),
    (b"icp6", 64),
    (b"ic07", 128),
    (b"ic08", 256),
    (b"ic09", 512),
    (b"ic10", 1024),
    (b"ic11", 32),
    (b"ic12", 64),
    (b"ic13", 256),
    (b"ic14", 512),
)


def render_png(svg: Path, size: int) -> bytes:
    """The SVG drawn at size x size pixels on a transparent background, as PNG bytes."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"render_icons: {svg} is not a valid SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    # PySide's stub types the format as bytes, but the binding refuses bytes and takes str.
    image.save(buffer, "PNG")  # type: ignore[call-overload]
    buffer.close()
    return bytes(data.data())


def build_ico(pngs: dict[int, bytes]) -> bytes:
    """An .ico whose entries are PNG-compressed (read by Windows Vista and later)."""
    header = struct.pack("<HHH", 0, 1, len(pngs))
    entries = b""
    offset = len(header) + 16 * len(pngs)
    body = b""
    for size, png in sorted(pngs.items()):
        # A dimension byte of 0 means 256.
        dim = 0 if size >= 256 else size
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(png), offset)
        offset += len(png)
        body += png
    return header + entries + body


def build_icns(pngs: dict[int, bytes]) -> bytes:
    """An .icns of PNG elements, the same file `iconutil -c icns` makes from an iconset."""
    body = b"".join(
        kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size] for kind, size in ICNS_TYPES
    )
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def write_iconset(folder: Path, pngs: dict[int, bytes]) -> None:
    """iconutil's input: icon_<points>x<points>[@2x].png, where @2x holds twice the pixels."""
    folder.mkdir(parents=True, exist_ok=True)
    for points in (16, 32, 128, 256, 512):
        (folder / f"icon_{points}x{points}.png").write_bytes(pngs[points])
        (folder / f"icon_{points}x{points}@2x.png").write_bytes(pngs[2 * points])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--svg", type=Path, default=SOURCE)
    parser.add_argument("--out", type=Path, default=ICONS)
    parser.add_argument(
        "--iconset",
        type=Path,
        help="also write an Apple .iconset folder here, for `iconutil -c icns`",
    )
    args = parser.parse_args(argv)
    # Rendering needs no display; offscreen keeps this working over ssh and in CI.
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    sizes = sorted({*PNG_SIZES, *ICO_SIZES, *(size for _, size in ICNS_TYPES)})
    pngs = {size: render_png(args.svg, size) for size in sizes}
    args.out.mkdir(parents=True, exist_ok=True)
    for size in PNG_SIZES:
        (args.out / f"specchat-{size}.png").write_bytes(pngs[size])
    (args.out / "specchat.ico").write_bytes(build_ico({s: pngs[s] for s in ICO_SIZES}))
    (args.out / "specchat.icns").write_bytes(build_icns(pngs))
    if args.iconset:
        write_iconset(args.iconset, pngs)
    print(f"render_icons: {len(PNG_SIZES)} PNGs, specchat.ico, specchat.icns in {args.out}")
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
