// SPDX-License-Identifier: MIT
pragma solidity ^0.8.37;

import {MintableERC20} from "./MintableERC20.sol";

/// @title TestStablecoin
/// @notice USDC-like test token: 6 decimals, mintable by the owner and by minters.
contract TestStablecoin is MintableERC20 {
    constructor(string memory name_, string memory symbol_) MintableERC20(name_, symbol_, 6) {}
}
