; Lull's Windows installer, for makensis 3.x (Debian's `nsis`); built by
; packaging/windows/build-installer.sh, which passes the defines below:
;   VERSION    the workspace's version (Cargo.toml), e.g. 0.1.0
;   EXE_DIR    the directory holding lull.exe (and lull-tray.exe, lull-window.exe when built,
;              the latter with WebView2Loader.dll, which tauri-build puts beside it)
;   OUTFILE    the installer to write
;   COMPRESSOR (optional) makensis' compressor, e.g. "/SOLID lzma" or zlib (default: zlib)
;
; A per-user install: no administrator, no UAC prompt. It puts lull.exe (and the tray app's
; two programs when they were built beside it) and uninstall.exe in
; %LOCALAPPDATA%\Programs\Lull, a Start-menu folder, and an "Apps & features" entry
; under HKCU. A 64-bit installer (Target amd64-unicode), as lull.exe is x86_64 only.
;
; The windows (lull-window.exe: status, settings) are WebView2 windows: they need the
; Microsoft Edge WebView2 Runtime, part of Windows 11 and of most Windows 10 machines but
; not all. The installer downloads nothing: it looks for the runtime where Microsoft says
; to (FindWebView2 below) and, when it is missing, says on the finish page what needs it
; and where to get it; either way it writes one line on it in install.log in the install
; directory (a silent install's only trace). lull-window.exe imports WebView2Loader.dll
; (Microsoft's WebView2 loader, from the webview2-com-sys crate), shipped beside it.
;
; The uninstaller removes only those: it deletes the files by name (never the directory
; recursively) and stops no process: if a program is running (Windows keeps its file in
; use) it says so and leaves everything in place, entry included, to be run again. It
; never touches the owner's Lull data and settings (the ledger, logs and config.toml),
; which are not in the install directory but in %APPDATA%\Lull\lull\data and
; %APPDATA%\Lull\lull\config (agent-core/src/paths.rs: `directories`' ProjectDirs for
; "org", "Lull", "lull"); the uninstaller's text says so. /S runs either silently.

!ifndef VERSION
  !error "define VERSION (the workspace's version), e.g. makensis -DVERSION=0.1.0"
!endif
!ifndef EXE_DIR
  !error "define EXE_DIR, the directory holding lull.exe"
!endif
!ifndef OUTFILE
  !define OUTFILE "lull-${VERSION}-x86_64-setup.exe"
!endif
!ifndef COMPRESSOR
  !define COMPRESSOR "zlib"
!endif
!if /FileExists "${EXE_DIR}\lull.exe"
!else
  !error "${EXE_DIR}\lull.exe not found"
!endif
; The tray app's programs, shipped when they were built beside lull.exe.
!if /FileExists "${EXE_DIR}\lull-tray.exe"
  !define HAVE_TRAY
!endif
!if /FileExists "${EXE_DIR}\lull-window.exe"
  !define HAVE_WINDOW
  !if /FileExists "${EXE_DIR}\WebView2Loader.dll"
  !else
    !error "${EXE_DIR}\lull-window.exe needs WebView2Loader.dll beside it (tauri-build puts it beside the exe it builds)"
  !endif
!endif

Unicode true
Target amd64-unicode
SetCompressor ${COMPRESSOR}
ManifestDPIAware true
RequestExecutionLevel user

!define APP "Lull"
!define PUBLISHER "The Lull developers"
!define UNINST_KEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\Lull"
; The Windows file version wants four numbers: 0.1.0 (or 0.1.0-rc.1) -> 0.1.0.0.
!searchparse /noerrors "${VERSION}" "" V_MAJOR "." V_MINOR "." V_PATCH
!searchparse /noerrors "${V_PATCH}" "" V_PATCH "-"

Name "${APP}"
OutFile "${OUTFILE}"
InstallDir "$LOCALAPPDATA\Programs\Lull"
; An upgrade goes where the last install went.
InstallDirRegKey HKCU "${UNINST_KEY}" "InstallLocation"
BrandingText "${APP} ${VERSION}"
VIProductVersion "${V_MAJOR}.${V_MINOR}.${V_PATCH}.0"
VIAddVersionKey "ProductName" "${APP}"
VIAddVersionKey "ProductVersion" "${VERSION}"
VIAddVersionKey "FileVersion" "${VERSION}"
VIAddVersionKey "CompanyName" "${PUBLISHER}"
VIAddVersionKey "FileDescription" "${APP} ${VERSION} setup"
VIAddVersionKey "LegalCopyright" "MIT OR Apache-2.0"

!include "MUI2.nsh"
!include "FileFunc.nsh"
!include "LogicLib.nsh"

!define MUI_ICON "${__FILEDIR__}\..\..\src-tauri\icons\icon.ico"
!define MUI_UNICON "${__FILEDIR__}\..\..\src-tauri\icons\icon.ico"
!define MUI_ABORTWARNING

!ifdef HAVE_TRAY
  !define MUI_WELCOMEPAGE_TEXT "This installs ${APP} ${VERSION} for you alone (no administrator needed): the Lull tray app and the lull command and agent, in your user's programs folder, with a Start-menu folder."
!else
  !define MUI_WELCOMEPAGE_TEXT "This installs ${APP} ${VERSION} for you alone (no administrator needed): the lull command and agent, in your user's programs folder, with a Start-menu folder."
!endif
!insertmacro MUI_PAGE_WELCOME
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
; Set by the install section (it may name the missing WebView2 Runtime).
Var FinishText
!define MUI_FINISHPAGE_TEXT "$FinishText"
!define MUI_FINISHPAGE_TEXT_LARGE
!insertmacro MUI_PAGE_FINISH

!define MUI_UNCONFIRMPAGE_TEXT_TOP "This removes ${APP}'s programs from the folder below, its Start-menu folder and its Apps & features entry. Quit Lull first (the agent and the tray app): nothing running is stopped. Your Lull data and settings (ledger, logs, config.toml in %APPDATA%\Lull) are kept; delete that folder yourself to remove them."
!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_INSTFILES

!insertmacro MUI_LANGUAGE "English"

!ifdef HAVE_WINDOW
; The WebView2 Runtime's version, or "" when it is not installed.
Var WebView2
!define WEBVIEW2_CLIENT "Microsoft\EdgeUpdate\Clients\{F3017226-FE2A-4295-8BDF-00C3A9A7E4C5}"
; Sets $WebView2 from the registry values Microsoft documents for detecting the runtime
; (learn.microsoft.com/microsoft-edge/webview2/concepts/distribution, "Detect if a WebView2
; Runtime is already installed"): pv under EdgeUpdate\Clients\{F3017226-...}, for the
; whole machine (WOW6432Node on 64-bit Windows) or for this user; missing, empty or
; 0.0.0.0 means not installed.
Function FindWebView2
  ReadRegStr $WebView2 HKLM "SOFTWARE\WOW6432Node\${WEBVIEW2_CLIENT}" "pv"
  ${If} $WebView2 == ""
  ${OrIf} $WebView2 == "0.0.0.0"
    ReadRegStr $WebView2 HKCU "Software\${WEBVIEW2_CLIENT}" "pv"
  ${EndIf}
  ${If} $WebView2 == "0.0.0.0"
    StrCpy $WebView2 ""
  ${EndIf}
FunctionEnd
!endif

Section "Lull" SecMain
  SectionIn RO
  StrCpy $FinishText "${APP} ${VERSION} is installed.$\r$\n$\r$\nClick Finish to close this wizard."
  SetOutPath "$INSTDIR"
  File "${EXE_DIR}\lull.exe"
!ifdef HAVE_TRAY
  File "${EXE_DIR}\lull-tray.exe"
!endif
!ifdef HAVE_WINDOW
  File "${EXE_DIR}\lull-window.exe"
  File "${EXE_DIR}\WebView2Loader.dll"
  Call FindWebView2
  ${If} $WebView2 == ""
    StrCpy $R1 "Lull's windows (status, settings) need the Microsoft Edge WebView2 Runtime, which is not installed: get it from https://developer.microsoft.com/microsoft-edge/webview2/ (the tray icon and the agent run without it)."
    StrCpy $FinishText "${APP} ${VERSION} is installed.$\r$\n$\r$\n$R1$\r$\n$\r$\nClick Finish to close this wizard."
  ${Else}
    StrCpy $R1 "Microsoft Edge WebView2 Runtime $WebView2 found: Lull's windows can open."
  ${EndIf}
  DetailPrint "$R1"
  FileOpen $R0 "$INSTDIR\install.log" w
  FileWrite $R0 "$R1$\r$\n"
  FileClose $R0
!endif
  WriteUninstaller "$INSTDIR\uninstall.exe"

  CreateDirectory "$SMPROGRAMS\Lull"
!ifdef HAVE_TRAY
  CreateShortcut "$SMPROGRAMS\Lull\Lull.lnk" "$INSTDIR\lull-tray.exe"
!else
  ; No tray app yet: the headless agent, in a console window of its own.
  CreateShortcut "$SMPROGRAMS\Lull\Lull agent.lnk" "$INSTDIR\lull.exe" "agent"
!endif

  WriteRegStr HKCU "${UNINST_KEY}" "DisplayName" "${APP}"
  WriteRegStr HKCU "${UNINST_KEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINST_KEY}" "Publisher" "${PUBLISHER}"
  WriteRegStr HKCU "${UNINST_KEY}" "DisplayIcon" "$INSTDIR\uninstall.exe"
  WriteRegStr HKCU "${UNINST_KEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINST_KEY}" "UninstallString" '"$INSTDIR\uninstall.exe"'
  WriteRegStr HKCU "${UNINST_KEY}" "QuietUninstallString" '"$INSTDIR\uninstall.exe" /S'
  WriteRegDWORD HKCU "${UNINST_KEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINST_KEY}" "NoRepair" 1
  ; In KiB, what Apps & features shows.
  ${GetSize} "$INSTDIR" "/S=0K" $0 $1 $2
  WriteRegDWORD HKCU "${UNINST_KEY}" "EstimatedSize" "$0"
SectionEnd

; Jumps to `in_use` with $R1 = FILE when FILE exists and cannot be opened for writing:
; Windows keeps a running program's file so, and the owner may be running any of them.
!macro UnInUse FILE
  ${If} ${FileExists} "${FILE}"
    ClearErrors
    FileOpen $R0 "${FILE}" a
    ${If} ${Errors}
      StrCpy $R1 "${FILE}"
      Goto in_use
    ${EndIf}
    FileClose $R0
  ${EndIf}
!macroend

Section "Uninstall"
  ; Every program any version installed, whether or not this one shipped it: nothing is
  ; removed while one of them is in use (running), and nothing running is stopped.
  !insertmacro UnInUse "$INSTDIR\lull-tray.exe"
  !insertmacro UnInUse "$INSTDIR\lull-window.exe"
  !insertmacro UnInUse "$INSTDIR\lull.exe"

  ; By name, never the directory recursively.
  Delete "$INSTDIR\lull-tray.exe"
  Delete "$INSTDIR\lull-window.exe"
  Delete "$INSTDIR\WebView2Loader.dll"
  Delete "$INSTDIR\install.log"
  Delete "$INSTDIR\lull.exe"
  Delete "$INSTDIR\uninstall.exe"
  ; Only if empty: never what the owner put there.
  RMDir "$INSTDIR"

  Delete "$SMPROGRAMS\Lull\Lull.lnk"
  Delete "$SMPROGRAMS\Lull\Lull agent.lnk"
  RMDir "$SMPROGRAMS\Lull"

  DeleteRegKey HKCU "${UNINST_KEY}"
  ; The guests' AppContainer profile (agent-core's guest/windows/appcontainer.rs makes it,
  ; per user, at the agent's first start): DeleteAppContainerProfile, looked up at run
  ; time as the agent does (Windows 8 and later; Wine 8.0's userenv.dll lacks it: then
  ; $0 is "error" and nothing else changes). An S_OK (0) or a profile never made both end it.
  System::Call 'userenv::DeleteAppContainerProfile(w "Lull.Guests") i .r0'
  DetailPrint "The guests' AppContainer profile Lull.Guests: DeleteAppContainerProfile gave $0."
  DetailPrint "Your Lull data and settings in $APPDATA\Lull are kept."
  Return

in_use:
  DetailPrint "$R1 is in use: quit Lull (the agent and the tray app) and uninstall again."
  MessageBox MB_ICONSTOP "$R1 is in use: quit Lull (the agent and the tray app), then uninstall again. Nothing was removed." /SD IDOK
  SetErrorLevel 2
  Abort
SectionEnd
