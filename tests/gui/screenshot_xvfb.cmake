# SPDX-License-Identifier: MIT
# Starts peat-workbench in a real X server (Xvfb), lets it render a session, and checks the PNG.
#   -DWORKBENCH=... -DSESSION=... -DOUT=...png   (SESSION "--demo": the demo session, made first)
file(REMOVE "${OUT}")
# Keep the test away from the user's settings (recent files, window layout).
get_filename_component(out_dir "${OUT}" DIRECTORY)
set(ENV{XDG_CONFIG_HOME} "${out_dir}/xdg-config")
set(ENV{XDG_DATA_HOME} "${out_dir}/xdg-data")  # where --demo makes its session
if(SESSION STREQUAL "--demo")
  file(REMOVE_RECURSE "${out_dir}/xdg-data")
endif()
execute_process(
  COMMAND xvfb-run -a -s "-screen 0 1600x1000x24" "${WORKBENCH}" --screenshot "${OUT}" "${SESSION}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 600)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "peat-workbench under Xvfb exited ${rc}\n${out}\n${err}")
endif()
if(NOT EXISTS "${OUT}")
  message(FATAL_ERROR "no screenshot at ${OUT}")
endif()
execute_process(COMMAND identify -format "%w %h %k" "${OUT}" OUTPUT_VARIABLE info RESULT_VARIABLE irc)
if(NOT irc EQUAL 0)
  message(FATAL_ERROR "identify cannot read ${OUT}")
endif()
separate_arguments(parts UNIX_COMMAND "${info}")
list(GET parts 0 width)
list(GET parts 1 height)
list(GET parts 2 colours)
if(width LESS 800 OR height LESS 500 OR colours LESS 20)
  message(FATAL_ERROR "screenshot looks wrong: ${width}x${height}, ${colours} colours")
endif()
message(STATUS "screenshot ${OUT}: ${width}x${height}, ${colours} colours")
