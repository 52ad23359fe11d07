# `cmake --install BUILD [--prefix P]` and `cpack` (a .deb): the two programs, and what they read at
# run time in standard places (GNUInstallDirs):
#   bin/attnres, bin/attnres-lab
#   share/attnres/scenarios/*.toml           the shipped scenarios
#   share/attnres/resources/{data,hardware}  the lab corpus (scenarios name ../resources/data/...) and
#                                            the hardware presets (also compiled into the programs)
#   share/attnres/models/                    the shipped trained models; attnres-lab looks in
#                                            <bin>/../share/attnres/models first (views.cpp)
#   share/doc/attnres_lab/                   README.md and docs/ (GNUInstallDirs: the project name)
#   share/applications/attnres-lab.desktop, share/icons/hicolor/scalable/apps/attnres-lab.svg
include(GNUInstallDirs)
set(ATTNRES_SHARE_DIR ${CMAKE_INSTALL_DATADIR}/attnres)
if(TARGET attnres)
  install(TARGETS attnres RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET attnres-lab)
  install(TARGETS attnres-lab RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/attnres-lab.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/attnres-lab.svg
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/scenarios/ DESTINATION ${ATTNRES_SHARE_DIR}/scenarios
        FILES_MATCHING PATTERN "*.toml")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/data ${PROJECT_SOURCE_DIR}/resources/hardware
        DESTINATION ${ATTNRES_SHARE_DIR}/resources)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/models/ DESTINATION ${ATTNRES_SHARE_DIR}/models)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

# cpack -G DEB (or the `deb` package preset): one package with everything above.
set(CPACK_PACKAGE_NAME "attnres-lab")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "AttnRes Lab")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Understand, teach and cost Attention Residuals (CLI and Qt GUI)")
set(CPACK_PACKAGE_CONTACT "AttnRes Lab maintainers <maintainers@attnres-lab.invalid>")
set(CPACK_GENERATOR "DEB")
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # dpkg-shlibdeps lists the Qt, Boost and CUDA libraries used
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
include(CPack)
