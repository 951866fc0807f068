# ctest script: the table generator must refuse a table whose bytes differ from SHA256SUMS,
# naming the file. Run with -DPYTHON=... -DGEN=... -DTABLES=... -DWORK=<scratch dir>.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(GLOB tables ${TABLES}/*)
file(COPY ${tables} DESTINATION ${WORK} NO_SOURCE_PERMISSIONS)
file(APPEND ${WORK}/kvalues_fp4.txt "0x00\n")
execute_process(COMMAND ${PYTHON} ${GEN} --tables ${WORK} --output ${WORK}/out.h
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "generator accepted a tampered table")
endif()
if(NOT err MATCHES "checksum mismatch for .*kvalues_fp4.txt")
  message(FATAL_ERROR "generator failed without naming the tampered file: ${err}")
endif()
if(EXISTS ${WORK}/out.h)
  message(FATAL_ERROR "generator wrote a header despite the mismatch")
endif()
file(REMOVE_RECURSE ${WORK})
