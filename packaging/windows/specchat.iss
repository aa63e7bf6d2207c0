; Inno Setup script for SpecChat on Windows: wraps the PyInstaller one-file build
; (dist\specchat.exe) in a per-user installer with a Start-menu entry and an uninstaller.
; Build:  iscc packaging\windows\specchat.iss   (after `pyinstaller packaging\pyinstaller\specchat.spec`)

#define AppName "SpecChat"
#define AppVersion "0.1.0"
#define AppId "io.github.specchat.SpecChat"

[Setup]
AppId={#AppId}
AppName={#AppName}
AppVersion={#AppVersion}
AppPublisher=The SpecChat developers
DefaultDirName={localappdata}\Programs\{#AppName}
DefaultGroupName={#AppName}
; Per-user: no administrator rights needed, like pipx.
PrivilegesRequired=lowest
OutputDir=..\..\dist
OutputBaseFilename=SpecChat-{#AppVersion}-setup
SetupIconFile=..\..\resources\icons\specchat.ico
UninstallDisplayIcon={app}\specchat.exe
Compression=lzma2
SolidCompression=yes
WizardStyle=modern
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible

[Files]
Source: "..\..\dist\specchat.exe"; DestDir: "{app}"; Flags: ignoreversion

[Icons]
Name: "{group}\{#AppName}"; Filename: "{app}\specchat.exe"; IconFilename: "{app}\specchat.exe"
Name: "{userdesktop}\{#AppName}"; Filename: "{app}\specchat.exe"; Tasks: desktopicon

[Tasks]
Name: "desktopicon"; Description: "Create a &desktop shortcut"; Flags: unchecked

[Run]
Filename: "{app}\specchat.exe"; Description: "Start {#AppName}"; Flags: nowait postinstall skipifsilent
